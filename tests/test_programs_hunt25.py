"""What programs written for PyTorch found, checked against torch: `make_fx` writes the
arguments PyTorch's schemas take by keyword only as keyword arguments (`cumsum(x, 1, dtype =
torch.float64)`, `add.Tensor(x, y, alpha = 2)`), leaves out those equal to their defaults, and
the GraphModule it makes runs them; `fusegrad.ops.aten` overloads take those keywords."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from program_support import check_make_fx_as_torch  # noqa: E402

import fusegrad as fg  # noqa: E402
from fusegrad.compiler.aot.make_fx import _keyword_start  # noqa: E402
from fusegrad.ops.overloads import parameters  # noqa: E402
from fusegrad.ops.registry import REGISTRY  # noqa: E402

# Functions whose make_fx graph is torch's, text for text (each takes a 3x3 input).
_KEYWORD_CALLS = {
    "sum_dtype": lambda T, x: x.sum(1, dtype=T.float64),
    "sum_keepdim_dtype": lambda T, x: x.sum(1, keepdim=True, dtype=T.float64),
    "mean_dtype": lambda T, x: x.mean(dtype=T.float64),
    "prod_dim_dtype": lambda T, x: x.prod(1, dtype=T.float64),
    "cumsum": lambda T, x: T.cumsum(x, 1),
    "cumsum_dtype": lambda T, x: T.cumsum(x, 1, dtype=T.float64),
    "to_double": lambda T, x: x.to(T.float64),
    "add_alpha": lambda T, x: T.add(x, x, alpha=2),
    "sub_alpha": lambda T, x: T.sub(x, 2 * x, alpha=3),
    "addmm_beta_alpha": lambda T, x: T.addmm(x, x, x.t() @ x, beta=0.5, alpha=2),
    "addcmul_value": lambda T, x: T.addcmul(x, x, x, value=0.5),
    "var_correction": lambda T, x: T.var(x, 1, correction=0, keepdim=True),
    "div_floor": lambda T, x: T.div(x, 2 * x + 1, rounding_mode="floor"),
    "clone_format": lambda T, x: x.clone(memory_format=T.contiguous_format),
    "round_decimals": lambda T, x: T.round(x, decimals=2),
    "sort_stable": lambda T, x: T.sort(x, stable=True, dim=1, descending=True)[0],
    "vector_norm_dtype": lambda T, x: T.linalg.vector_norm(x, 2, dim=1, dtype=T.float64),
    "softmax": lambda T, x: T.softmax(x, dim=-1),
    "var_all": lambda T, x: x.var(),
    "var_mean_correction": lambda T, x: T.var_mean(x, 1, correction=0)[0],
    "nan_to_num": lambda T, x: T.nan_to_num(x, nan=0.0, posinf=1.0),
    "mean_keepdim": lambda T, x: x.mean(-1, keepdim=True),
}


@pytest.mark.parametrize("name", list(_KEYWORD_CALLS))
def test_make_fx_writes_keyword_only_arguments_as_torch(name):
    # the GraphModule runs its keyword arguments: eager's values
    check_make_fx_as_torch(_KEYWORD_CALLS[name], torch, fg, seed=0)


# Registry entries whose kernel's parameters do not tell where PyTorch's keyword-only part
# starts (a name taken by keyword in one schema and positionally in another).
_KEYWORD_SPLIT_GAPS = {
    "linalg_cross", "bernoulli", "normal.Tensor_float", "normal.float_Tensor",
    "normal.Tensor_Tensor", "multinomial", "norm.ScalarOpt_dim", "scatter.reduce",
    "scatter.value_reduce", "scatter_.reduce", "scatter_.value_reduce", "aminmax",
    "histogram.bin_ct", "_safe_softmax", "linalg_cholesky_ex", "linalg_lu_solve",
    "_segment_reduce_backward", "segment_reduce", "linalg_solve_ex", "linalg_solve_triangular",
    "linalg_pinv.atol_rtol_float", "linalg_pinv.atol_rtol_tensor",
}


def test_keyword_only_parameters_are_torch_schemas():
    """Over the registry, the first parameter make_fx writes by keyword is the first one
    PyTorch's schema of the same overload takes by keyword only (the gaps listed aside)."""
    differ, checked = set(), 0
    for name, op in REGISTRY.items():
        packet, _, overload = name.partition(".")
        schema = getattr(getattr(torch.ops.aten, packet, None), overload or "default", None)
        params = parameters(op)
        if schema is None or not params:
            continue
        checked += 1
        want = next((i for i, a in enumerate(schema._schema.arguments) if a.kwarg_only), None)
        if want is not None and want >= len(params):
            want = None
        if _keyword_start(op, params) != want:
            differ.add(name)
    assert checked > 500
    assert differ == _KEYWORD_SPLIT_GAPS


def test_overloads_take_keyword_arguments_as_torch():
    x = np.array([1.0, -2.0, 3.5], np.float32)
    for T in (torch, fg):
        a = T.tensor(x)
        got = [T.ops.aten.add.Tensor(a, a, alpha=2),
               T.ops.aten.sum.dim_IntList(a, [0], dtype=T.float64),
               T.ops.aten.cumsum.default(a, 0, dtype=T.float64),
               T.ops.aten.div.Tensor_mode(a, a + 3, rounding_mode="floor")]
        if T is torch:
            want = [(str(t.dtype).split(".")[1], t.numpy()) for t in got]
    assert [(t.dtype.name, t.numpy().tolist()) for t in got] == \
        [(d, v.tolist()) for d, v in want]
    with pytest.raises(RuntimeError, match="Unknown keyword argument 'beta' for operator "
                                           "'aten::add'"):
        fg.ops.aten.add.Tensor(fg.tensor(x), fg.tensor(x), beta=2)


def _exported(T):
    nn = T.nn

    class Scored(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("s", T.ones(2))
            self.register_buffer("tmp", T.zeros(2), persistent=False)

        def forward(self, x, *, scale: float = 2.0):
            return ((x * self.s + self.tmp).relu().sum(-1, dtype=T.float64) * scale,
                    T.cumsum(x, 1, dtype=T.float64))

    return T.export.export(Scored(), (T.ones(3, 2),), {"scale": 3.0})


def test_exported_graph_and_signature_text_as_torch():
    """The exported graph writes keyword-only arguments as keywords, and its specs print as
    the lines of the signature's text (with its leading newline), as torch.export's."""
    want, got = _exported(torch), _exported(fg)
    assert got.graph_module.code.replace("fusegrad.", "torch.") == want.graph_module.code
    assert [str(s) for s in got.graph_signature.input_specs] == \
        [str(s) for s in want.graph_signature.input_specs]
    assert [str(s) for s in got.graph_signature.output_specs] == \
        [str(s) for s in want.graph_signature.output_specs]
    assert str(got.graph_signature) == str(want.graph_signature)
    # (the program's text past its graph: the graph's comments name no source lines here)
    assert str(got).split("Graph signature:")[1] == str(want).split("Graph signature:")[1]
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for a, b in zip(got.module()(fg.tensor(x), scale=3.0), want.module()(torch.tensor(x),
                                                                         scale=3.0)):
        np.testing.assert_allclose(a.numpy(), b.numpy())
