"""What programs written for PyTorch found, checked against torch: the modules' forward
signatures carry PyTorch's type hints (so `inspect.signature` and the code `fx.symbolic_trace`
writes show them), `torch.nn.attention.bias`'s causal masks given to
`scaled_dot_product_attention` (eager and compiled), and `load_state_dict(assign=True)` telling
each module through its metadata, as PyTorch does."""

import inspect
import os
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_program, error_of  # noqa: E402

import fusegrad as fg  # noqa: E402


def _modules_with_forward():
    """The names of torch.nn's module classes that fusegrad has too."""
    names = []
    for name in sorted(dir(torch.nn)):
        cls = getattr(torch.nn, name)
        if inspect.isclass(cls) and issubclass(cls, torch.nn.Module) and hasattr(fg.nn, name):
            names.append(name)
    return names


def _signature(cls, lib: str) -> str:
    """`cls.forward`'s signature as text, its library's name taken out of the annotations."""
    return str(inspect.signature(cls.forward)).replace(f"{lib}.", "")


def test_module_forward_signatures_are_torchs():
    """Every module's forward has PyTorch's parameters, defaults and type hints."""
    names = _modules_with_forward()
    assert len(names) > 100
    differ = [name for name in names
              if _signature(getattr(torch.nn, name), "torch")
              != _signature(getattr(fg.nn, name), "fusegrad")]
    assert differ == []


def _traced_headers(T):
    nn = T.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3)

        def forward(self, x):
            return self.conv(x)

    mods = [nn.Linear(3, 2), nn.Conv2d(1, 1, 1), nn.LayerNorm(3), nn.Dropout(), nn.Softmax(-1),
            nn.Embedding(3, 2), nn.EmbeddingBag(3, 2), nn.CosineSimilarity(), nn.MSELoss(),
            nn.MaxPool2d(2), nn.Sequential(nn.Linear(2, 2), nn.ReLU()), Net()]
    headers = []
    for m in mods:
        gm = T.fx.symbolic_trace(m)
        headers.append(gm.code.strip().split("\n")[0].replace("fusegrad", "torch"))
        headers.append([str(n.type).replace("fusegrad", "torch") for n in gm.graph.nodes
                        if n.op == "placeholder"])
    return headers


def test_traced_modules_are_annotated_as_torchs():
    """The code fx writes for a traced module has its forward's annotations, as torch.fx's
    (fusegrad's code names its own package where torch's names `torch`, by design)."""
    headers = _traced_headers(torch)
    assert _traced_headers(fg) == headers
    assert headers[0] == "def forward(self, input : torch.Tensor) -> torch.Tensor:"


def causal_bias_attention(torch):
    from importlib import import_module

    B = import_module(torch.__name__ + ".nn.attention.bias")
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    q = torch.tensor(rng.standard_normal((1, 2, 3, 4)), dtype=torch.float32, requires_grad=True)
    k = torch.tensor(rng.standard_normal((1, 2, 5, 4)), dtype=torch.float32, requires_grad=True)
    v = torch.tensor(rng.standard_normal((1, 2, 5, 4)), dtype=torch.float32)
    lower, upper, square = B.causal_lower_right(3, 5), B.causal_upper_left(3, 5), \
        B.causal_lower_right(3, 3)
    o1 = F.scaled_dot_product_attention(q, k, v, attn_mask=lower)
    o2 = F.scaled_dot_product_attention(q, k, v, attn_mask=upper, scale=0.3)
    o3 = F.scaled_dot_product_attention(q, q, q, attn_mask=square)
    (o1.sum() + o2.pow(2).sum() + o3.sum()).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        B.causal_lower_right(5, 3)
    mistakes = [error_of(lambda: B.causal_lower_right(1, 2, 3)),
                error_of(lambda: B.causal_upper_left(3)),
                error_of(lambda: B.CausalBias(1, 2, 2)),
                error_of(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=lower,
                                                                is_causal=True))]
    return [o1, o2, o3, q.grad, k.grad, lower._materialize(), upper._materialize(), repr(lower),
            repr(upper), lower.variant == B.CausalVariant.LOWER_RIGHT, lower.seq_len_q,
            lower.seq_len_kv, isinstance(lower, torch.Tensor), type(lower).__name__,
            [str(w.message) for w in caught], mistakes, B.__all__,
            [(v.name, int(v)) for v in B.CausalVariant]]


def test_causal_bias_attention():
    """`causal_upper_left` / `causal_lower_right` as attention masks: PyTorch's values,
    gradients, node names (the flash kernel's), printing and errors."""
    check_program(causal_bias_attention, torch, fg)


def _bias_program(T, made_inside: bool):
    """(the function, its arguments): attention under a lower-right causal bias made inside
    the function or given to it."""
    from importlib import import_module

    B = import_module(T.__name__ + ".nn.attention.bias")
    F = T.nn.functional

    def inside(q, k):
        mask = B.causal_lower_right(q.shape[-2], k.shape[-2])
        return F.scaled_dot_product_attention(q, k, k, attn_mask=mask).sum()

    def given(q, k, mask):
        return F.scaled_dot_product_attention(q, k, k, attn_mask=mask).sum()

    q = T.linspace(-1, 1, 24).reshape(1, 2, 3, 4)
    k = T.linspace(-1, 2, 40).reshape(1, 2, 5, 4)
    return (inside, (q, k)) if made_inside else (given, (q, k, B.causal_lower_right(3, 5)))


# torch.compile's (graphs, graph breaks) for `_bias_program`, backend="eager" (torch 2.13):
# building the bias inside the compiled function breaks the graph once.
_TORCH_COUNTS = {False: (1, 0), True: (1, 1)}


@pytest.mark.parametrize("made_inside", [False, True])
def test_causal_bias_compiled(made_inside):
    """Compiled, a bias given as an input keeps one graph; one made inside the function
    breaks it once, as torch.compile's do; the values are torch's."""
    fn, args = _bias_program(fg, made_inside)
    fg._dynamo.reset()
    counters = fg._dynamo.utils.counters
    counters.clear()
    got = float(fg.compile(fn, backend="eager")(*args))
    counts = (counters["stats"]["unique_graphs"], sum(counters["graph_break"].values()))
    assert counts == _TORCH_COUNTS[made_inside]
    torch_fn, torch_args = _bias_program(torch, made_inside)
    assert got == pytest.approx(float(torch_fn(*torch_args)), abs=1e-5)


def assign_through_metadata(torch):
    nn = torch.nn
    seen = []

    class Recording(nn.Linear):
        def _load_from_state_dict(self, state_dict, prefix, local_metadata, *rest):
            seen.append((prefix, sorted(local_metadata.items())))
            super()._load_from_state_dict(state_dict, prefix, local_metadata, *rest)

    def build():
        return nn.Sequential(Recording(2, 2), nn.LayerNorm(2))

    with torch.no_grad():
        src = build()
        for i, p in enumerate(src.parameters()):
            p.copy_(torch.arange(p.numel(), dtype=torch.float32).reshape(p.shape) * (i + 1))
    sd = src.state_dict()
    with torch.device("meta"):
        model = build()
    model.load_state_dict(sd, assign=True)
    devices = [str(p.device) for p in model.parameters()]
    # The state_dict's metadata keeps the flag: a later load of the same dict assigns too.
    with torch.device("meta"):
        again = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again.load_state_dict(sd)
        fresh = build().to("meta")
        fresh.load_state_dict(dict(sd))
    return [seen, devices, [str(p.device) for p in again.parameters()],
            [str(p.device) for p in fresh.parameters()],
            sorted((k, sorted(v.items())) for k, v in sd._metadata.items()),
            model(torch.ones(1, 2)), again(torch.ones(1, 2))]


def test_load_state_dict_assign_is_in_the_metadata():
    """`assign=True` reaches `_load_from_state_dict` as the metadata's
    "assign_to_params_buffers", and stays in the state_dict's metadata, as in PyTorch."""
    check_program(assign_through_metadata, torch, fg)
