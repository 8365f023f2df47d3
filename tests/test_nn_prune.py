"""`nn.utils.prune` against PyTorch: the `weight_orig` parameter, `weight_mask` buffer and
forward pre-hook, state_dict keys, the masks of the deterministic methods (L1, Ln-structured,
global, custom, identity) and of iterative pruning through a PruningContainer, the gradient
reaching `weight_orig` and an optimizer step, `remove`, `is_pruned`, and the messages."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import importlib  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (list, tuple)):
        return type(value)(_rounded(v) for v in value)
    return value


def _story(lib) -> list:
    prune = importlib.import_module(lib.__name__ + ".nn.utils.prune")
    rng = np.random.default_rng(0)
    out = []

    def T(a):
        return lib.tensor(np.asarray(a, dtype=np.float32))

    def err(f):
        try:
            f()
        except Exception as e:  # noqa: BLE001  (the error is what is compared)
            return (type(e).__name__, str(e))
        return None

    lin = lib.nn.Linear(4, 3)
    w0 = rng.permutation(12).reshape(3, 4).astype(np.float32) - 5.5
    lin.weight.data = T(w0)
    lin.bias.data = T([0.5, -1, 2])
    prune.l1_unstructured(lin, "weight", amount=0.25)
    out.append(sorted(lin.state_dict().keys()))
    out.append([n for n, _ in lin.named_parameters()])
    out.append([n for n, _ in lin.named_buffers()])
    out.append(lin.weight_mask.tolist())
    out.append(lin.weight.tolist())
    out.append(prune.is_pruned(lin))
    out.append(type(list(lin._forward_pre_hooks.values())[0]).__name__)
    prune.ln_structured(lin, "weight", amount=1, n=2, dim=0)
    hook = list(lin._forward_pre_hooks.values())[0]
    out.append((type(hook).__name__, len(hook), [type(h).__name__ for h in hook]))
    out.append(lin.weight_mask.tolist())
    prune.l1_unstructured(lin, "weight", amount=2)
    out.append(lin.weight_mask.tolist())
    x = T(rng.standard_normal((2, 4)))
    y = lin(x)
    y.sum().backward()
    out.append(lin.weight_orig.grad.tolist())
    opt = lib.optim.SGD(lin.parameters(), lr=0.1)
    opt.step()
    out.append(lin(x).tolist())
    prune.remove(lin, "weight")
    out.append((sorted(lin.state_dict().keys()), type(lin.weight).__name__,
                lin.weight.tolist(), prune.is_pruned(lin)))
    # bias: identity, custom_from_mask
    prune.identity(lin, "bias")
    out.append(lin.bias_mask.tolist())
    prune.remove(lin, "bias")
    prune.custom_from_mask(lin, "bias", mask=T([1, 0, 1]))
    out.append(lin.bias.tolist() == [lin.bias_orig.tolist()[0], 0.0, lin.bias_orig.tolist()[2]])
    # importance scores
    conv = lib.nn.Conv2d(2, 4, 2)
    conv.weight.data = T(rng.standard_normal((4, 2, 2, 2)))
    scores = T(rng.standard_normal((4, 2, 2, 2)))
    prune.ln_structured(conv, "weight", amount=0.5, n=1, dim=0, importance_scores=scores)
    out.append(conv.weight_mask.sum(dim=(1, 2, 3)).tolist())
    prune.ln_structured(conv, "weight", amount=1, n=float("inf"), dim=1)
    out.append(conv.weight_mask.tolist())
    # global
    a, b = lib.nn.Linear(3, 3), lib.nn.Linear(3, 2)
    a.weight.data = T(rng.permutation(9).reshape(3, 3) - 4.5)
    b.weight.data = T(rng.permutation(6).reshape(2, 3) * 1.5 + 0.25)
    pairs = [(a, "weight"), (b, "weight")]
    prune.global_unstructured(pairs, pruning_method=prune.L1Unstructured, amount=5)
    out.append((a.weight_mask.tolist(), b.weight_mask.tolist(),
                [type(h).__name__ for h in a._forward_pre_hooks.values()]))
    prune.global_unstructured(pairs, pruning_method=prune.L1Unstructured, amount=0.2)
    out.append((a.weight_mask.tolist(), b.weight_mask.tolist()))
    # plain prune()
    out.append(prune.L1Unstructured(amount=2).prune(T([3, -1, 2, 0.5])).tolist())
    # errors, and the module left as it was
    m = lib.nn.Linear(2, 2)
    out.append(err(lambda: prune.l1_unstructured(m, "weight", amount=1.5)))
    out.append(err(lambda: prune.l1_unstructured(m, "weight", amount=-1)))
    out.append(err(lambda: prune.l1_unstructured(m, "weight", amount="a")))
    out.append(err(lambda: prune.l1_unstructured(m, "weight", amount=7)))
    out.append(sorted(m.state_dict().keys()))  # left as it was
    out.append(err(lambda: prune.ln_structured(m, "bias", amount=1, n=2, dim=0)))
    out.append(sorted(m.state_dict().keys()))
    out.append(err(lambda: prune.ln_structured(m, "weight", amount=1, n=2, dim=2)))
    out.append(err(lambda: prune.remove(m, "weight")))
    out.append(err(lambda: prune.global_unstructured(
        [(m, "weight")], pruning_method=prune.RandomStructured, amount=1)))
    out.append(err(lambda: prune.global_unstructured(
        3, pruning_method=prune.L1Unstructured, amount=1)))
    out.append(err(lambda: prune.global_unstructured(
        [(m, "weight")], pruning_method=prune.L1Unstructured, importance_scores=[1], amount=1)))
    c = prune.PruningContainer()
    c._tensor_name = "w"
    out.append(err(lambda: c.add_pruning_method(3)))
    i2 = prune.Identity()
    i2._tensor_name = "v"
    out.append(err(lambda: c.add_pruning_method(i2)))
    h1 = prune.Identity()
    h1._tensor_name = "weight"
    m2 = lib.nn.Linear(2, 2)
    prune.identity(m2, "weight")
    m2.register_forward_pre_hook(h1)
    out.append(err(lambda: prune.identity(m2, "weight")))
    out.append(err(lambda: prune.l1_unstructured(lib.nn.Linear(2, 2), "weight", 1,
                                                 importance_scores=T([1.0]))))
    # random methods: how many entries and channels they prune
    lib.manual_seed(0)
    r = lib.nn.Linear(5, 4)
    prune.random_unstructured(r, "weight", amount=0.3)
    prune.random_structured(r, "weight", amount=2, dim=1)
    cols = r.weight_mask.sum(dim=0).tolist()
    out.append((cols.count(0.0), 20 - int(r.weight_mask.sum()) - 4 * 2 <= 6))
    text = re.sub(" at 0x[0-9a-f]+", "", repr(_rounded(out)))
    return text.replace(lib.__name__ + ".", "torch.")


def test_prune_matches_torch():
    ours, theirs = _story(fusegrad), _story(torch)
    assert ours == theirs


def test_prune_module_surface():
    import torch.nn.utils.prune as theirs

    import fusegrad.nn.utils.prune as ours

    public = [n for n in dir(theirs) if not n.startswith("_") and n not in
              ("ABC", "Iterable", "abstractmethod", "numbers", "torch")]
    assert [n for n in public if not hasattr(ours, n)] == []
