"""Module and container behaviours fixed after running the same programs under torch and
fusegrad, each checked against torch directly: extra state in state dicts, the deprecated
`register_backward_hook`, `to_empty`, `set_submodule`, `share_memory`, Sequential's pop and
repetition, ParameterList and ParameterDict as PyTorch has them, the 3-D lazy modules,
MultiheadAttention not calling its out_proj module, and the messages of GroupNorm, Unflatten
and MultiheadAttention."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402
from collections import OrderedDict  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from outcomes import Values, outcome, plain, same_outcome  # noqa: E402

import fusegrad  # noqa: E402

LIBS = (torch, fusegrad)
_Values, _plain, _outcome, _same = Values, plain, outcome, same_outcome


def _copy_state(src, dst) -> None:
    """Load torch module `src`'s parameters and buffers into fusegrad module `dst`."""
    state = {k: fusegrad.tensor(v.detach().numpy()) for k, v in src.state_dict().items()}
    dst.load_state_dict(state)


# ---------------------------------------------------------------- extra state


def _stateful(T, with_get: bool = True, with_set: bool = True):
    """A module class with a counter kept as extra state (get and/or set overridden)."""

    class Stateful(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = T.nn.Linear(2, 2)
            self.count = 3
            self.loaded = []

        def forward(self, x):
            return self.lin(x)

    if with_get:
        Stateful.get_extra_state = lambda self: {"count": self.count}
    if with_set:
        def set_extra_state(self, state):
            self.loaded.append(state)
            self.count = state["count"]
        Stateful.set_extra_state = set_extra_state
    return Stateful


def _nested(T, **kwargs):
    cls = _stateful(T, **kwargs)
    return T.nn.Sequential(OrderedDict(first=cls(), rest=T.nn.Sequential(T.nn.ReLU(), cls())))


def test_extra_state_in_state_dict_and_loaded_back():
    def program(T):
        src = _nested(T)
        src.first.count, src.rest[1].count = 7, 9
        sd = src.state_dict()
        dst = _nested(T)
        result = dst.load_state_dict(sd)
        return (list(sd), sd["first._extra_state"], sd["rest.1._extra_state"], repr(result),
                dst.first.loaded, dst.rest[1].loaded, dst.rest[1].count)

    _same(program)


def test_extra_state_with_prefix_and_keep_vars():
    def program(T):
        m = _stateful(T)()
        return list(m.state_dict(prefix="outer.", keep_vars=True))

    _same(program)


@pytest.mark.parametrize("strict", [True, False])
def test_extra_state_missing_key(strict):
    def program(T):
        m = _nested(T)
        sd = m.state_dict()
        del sd["rest.1._extra_state"]
        result = m.load_state_dict(sd, strict=strict)
        return result.missing_keys, result.unexpected_keys, m.rest[1].loaded

    _same(program)


@pytest.mark.parametrize("strict", [True, False])
def test_extra_state_without_set_extra_state_is_unexpected(strict):
    def program(T):
        m = _nested(T, with_set=False)
        sd = m.state_dict()
        result = m.load_state_dict(sd, strict=strict)
        return list(sd), result.missing_keys, result.unexpected_keys

    _same(program)


def test_set_extra_state_only_wants_the_key():
    def program(T):
        m = _nested(T, with_get=False)
        sd = m.state_dict()
        return list(sd), m.load_state_dict(sd)

    _same(program)


def test_extra_state_with_load_from_state_dict_override():
    def program(T):
        base = _stateful(T)

        class Renaming(base):
            def _load_from_state_dict(self, state_dict, prefix, *args):
                old = prefix + "old_extra"
                if old in state_dict:
                    state_dict[prefix + "_extra_state"] = state_dict.pop(old)
                super()._load_from_state_dict(state_dict, prefix, *args)

        m = T.nn.Sequential(Renaming())
        sd = m.state_dict()
        sd["0.old_extra"] = sd.pop("0._extra_state")
        sd["0._extra_state"] = {"count": 1}
        del sd["0._extra_state"]
        result = m.load_state_dict(sd)
        return repr(result), m[0].loaded

    _same(program)


def test_extra_state_of_a_layer_that_overrides_loading():
    """BatchNorm's own `_load_from_state_dict` (old checkpoints' num_batches_tracked) calls
    the base one, which loads the extra state."""
    def program(T):
        class Counted(T.nn.BatchNorm1d):
            def get_extra_state(self):
                return "tag"

            def set_extra_state(self, state):
                self.tag = state

        m = T.nn.Sequential(T.nn.Linear(2, 3), Counted(3))
        sd = m.state_dict()
        del sd["1.num_batches_tracked"]
        result = m.load_state_dict(sd, strict=False)
        return list(m.state_dict()), m[1].tag, repr(result)

    _same(program)


def test_extra_state_tensor_value_and_base_methods():
    def program(T):
        class TensorState(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.value = T.arange(3.0)

            def get_extra_state(self):
                return self.value

            def set_extra_state(self, state):
                self.value = state * 2

        m = TensorState()
        sd = m.state_dict()
        m.load_state_dict(sd)
        return sd["_extra_state"], m.value

    _same(program)
    _same(lambda T: T.nn.Module().get_extra_state())
    _same(lambda T: T.nn.Module().set_extra_state(1))


def test_instance_attribute_is_not_extra_state():
    def program(T):
        m = T.nn.Linear(2, 2)
        m.get_extra_state = lambda: 1
        m.set_extra_state = lambda state: None
        return list(m.state_dict())

    _same(program)


@pytest.mark.parametrize("key", ["lin", "lin.weight.x", "count", "lin.nothing"])
def test_unexpected_keys_follow_pytorchs_rule(key):
    def program(T):
        m = _stateful(T)()
        sd = m.state_dict()
        sd[key] = T.zeros(1)
        return m.load_state_dict(sd, strict=False)

    _same(program)


# ---------------------------------------------------------------- register_backward_hook


# `global_backward_hook_kind` is a fixture of tests/conftest.py.


def _shapes(grads):
    return [None if g is None else tuple(g.shape) for g in grads]


def _backward_hook_run(T, make, inputs, reduce=None):
    """(what the hooks saw, the leaf grads) for module `make(T)` called on `inputs(T)`."""
    module = make(T)
    seen = []
    module.register_backward_hook(
        lambda m, gi, go: seen.append((type(m).__name__, _shapes(gi), _shapes(go))))
    args = inputs(T)
    out = module(*args)
    if isinstance(out, dict):
        out = list(out.values())
    loss = sum(o.sum() for o in out) if isinstance(out, (list, tuple)) else out.sum()
    loss.backward()
    leaves = [a for a in args if isinstance(a, T.Tensor) and a.is_leaf and a.requires_grad]
    return seen, [a.grad for a in leaves], [p.grad for p in module.parameters()]


def _leaf(T, *shape):
    return T.randn(*shape, requires_grad=True)


class _Cases:
    """Modules and inputs of the deprecated hook's cases, built for either library."""

    @staticmethod
    def two_outputs(T):
        class Two(T.nn.Module):
            def forward(self, a, b):
                return a * 2, b * 3
        return Two()

    @staticmethod
    def list_output(T):
        class Lst(T.nn.Module):
            def forward(self, a):
                return [a * 2, a * 3]
        return Lst()

    @staticmethod
    def dict_output(T):
        class Dct(T.nn.Module):
            def forward(self, a):
                return {"x": a * 2}
        return Dct()

    @staticmethod
    def scalar_argument(T):
        class Scale(T.nn.Module):
            def forward(self, a, n):
                return a * n
        return Scale()

    @staticmethod
    def unbind(T):
        class Unbind(T.nn.Module):
            def forward(self, a):
                return T.sin(a).unbind(0)
        return Unbind()


BACKWARD_HOOK_CASES = {
    "linear": (lambda T: T.nn.Linear(3, 2), lambda T: (_leaf(T, 4, 3),)),
    "linear input without grad": (lambda T: T.nn.Linear(3, 2), lambda T: (T.randn(4, 3),)),
    "linear 3d": (lambda T: T.nn.Linear(3, 2), lambda T: (_leaf(T, 5, 4, 3),)),
    "linear 1d": (lambda T: T.nn.Linear(3, 2), lambda T: (_leaf(T, 3),)),
    "linear without bias": (lambda T: T.nn.Linear(3, 2, bias=False),
                            lambda T: (_leaf(T, 4, 3),)),
    "sequential": (lambda T: T.nn.Sequential(T.nn.Linear(3, 4), T.nn.ReLU(),
                                             T.nn.Linear(4, 2)),
                   lambda T: (_leaf(T, 4, 3),)),
    "relu on a leaf": (lambda T: T.nn.ReLU(), lambda T: (_leaf(T, 4, 3),)),
    "sigmoid on a non-leaf": (lambda T: T.nn.Sigmoid(), lambda T: (_leaf(T, 4, 3) * 2,)),
    "conv2d": (lambda T: T.nn.Conv2d(2, 3, 3), lambda T: (_leaf(T, 1, 2, 5, 5),)),
    "two outputs": (_Cases.two_outputs, lambda T: (_leaf(T, 2, 2) * 1, _leaf(T, 2, 2) * 1)),
    "list output": (_Cases.list_output, lambda T: (_leaf(T, 2, 2) * 1,)),
    "dict output": (_Cases.dict_output, lambda T: (_leaf(T, 2, 2) * 1,)),
    "scalar argument": (_Cases.scalar_argument, lambda T: (_leaf(T, 2, 2) * 1, 3.0)),
    "outputs of one node": (_Cases.unbind, lambda T: (_leaf(T, 2, 2) * 1,)),
}


@pytest.mark.parametrize("case", list(BACKWARD_HOOK_CASES))
def test_register_backward_hook_arguments_and_warnings(case):
    make, inputs = BACKWARD_HOOK_CASES[case]
    _same(lambda T: _backward_hook_run(T, make, inputs))


def test_register_backward_hook_may_replace_grad_input():
    def program(T):
        lin = T.nn.Linear(3, 2)
        x = T.randn(4, 3, requires_grad=True)
        lin.register_backward_hook(
            lambda m, gi, go: tuple(None if g is None else g * 2 for g in gi))
        lin(x).sum().backward()
        return x.grad, lin.weight.grad, lin.bias.grad

    _same(program)


def test_register_backward_hook_removal_and_no_grad():
    def program(T):
        lin = T.nn.Linear(3, 2)
        seen = []
        handle = lin.register_backward_hook(lambda *args: seen.append(1))
        with T.no_grad():
            lin(T.ones(1, 3))
        handle.remove()
        lin(T.ones(1, 3, requires_grad=True)).sum().backward()
        return seen, len(lin._backward_hooks), lin._is_full_backward_hook

    _same(program)


@pytest.mark.parametrize("first", ["full", "regular"])
def test_backward_hook_kinds_do_not_mix(first):
    def program(T):
        lin = T.nn.Linear(2, 2)
        hooks = [lin.register_full_backward_hook, lin.register_backward_hook]
        if first == "regular":
            hooks.reverse()
        hooks[0](lambda *args: None)
        flag = lin._is_full_backward_hook
        hooks[1](lambda *args: None)
        return flag

    _same(program)


def test_full_backward_hook_unchanged():
    def program(T):
        lin = T.nn.Linear(3, 2)
        seen = []
        lin.register_full_backward_hook(lambda m, gi, go: seen.append((_shapes(gi),
                                                                       _shapes(go))))
        x = T.randn(4, 3, requires_grad=True)
        lin(x).sum().backward()
        return seen, x.grad, lin._is_full_backward_hook

    _same(program)


def test_global_deprecated_backward_hook(global_backward_hook_kind):
    def program(T):
        from importlib import import_module

        hooks = import_module(T.__name__ + ".nn.modules.module")
        # where each library keeps the kind of its global hooks (a test before may have set it)
        flags = import_module(T.__name__ + (".nn.modules._global_hooks" if T is fusegrad
                                             else ".nn.modules.module"))
        flags._global_is_full_backward_hook = None
        seen = []
        handle = hooks.register_module_backward_hook(
            lambda m, gi, go: seen.append((type(m).__name__, _shapes(gi))))
        try:
            model = T.nn.Sequential(T.nn.Linear(3, 2), T.nn.Tanh())
            model(T.randn(4, 3, requires_grad=True)).sum().backward()
            try:
                hooks.register_module_full_backward_hook(lambda *args: None)
            except RuntimeError as e:
                seen.append(str(e))
        finally:
            handle.remove()
        return seen

    _same(program)


# ---------------------------------------------------------------- to_empty, set_submodule,
#                                                                    share_memory


def test_to_empty_keeps_objects_shapes_and_dtypes():
    def program(T):
        model = T.nn.Sequential(T.nn.Linear(2, 3), T.nn.BatchNorm1d(3)).double()
        weight = model[0].weight
        model[0](T.ones(1, 2, dtype=T.float64)).sum().backward()
        out = model.to_empty(device="cpu")
        out2 = model.to_empty(device=T.device("cpu"), recurse=False)
        return (out is model, out2 is model, model[0].weight is weight,
                [(n, tuple(t.shape), str(t.dtype), t.requires_grad, type(t).__name__)
                 for n, t in model.state_dict(keep_vars=True).items()],
                tuple(weight.grad.shape))

    _same(program)


@pytest.mark.parametrize("call", ["no device", "positional", "cuda"])
def test_to_empty_errors(call):
    def program(T):
        lin = T.nn.Linear(2, 2)
        if call == "no device":
            return lin.to_empty()
        if call == "positional":
            return lin.to_empty("cpu")
        return lin.to_empty(device="cuda")

    _same(program)


@pytest.mark.parametrize("target, strict", [
    ("0", False), ("5", False), ("5", True), ("1.inner", False), ("1.inner", True),
    ("1.new", False), ("", False), ("0.weight", False), ("0.x.y", False), ("bias", False),
])
def test_set_submodule(target, strict):
    def program(T):
        inner = T.nn.Module()
        inner.add_module("inner", T.nn.Tanh())
        model = T.nn.Sequential(T.nn.Linear(2, 2), inner)
        model.set_submodule(target, T.nn.ReLU(), strict=strict)
        return repr(model)

    _same(program)


def test_set_submodule_needs_a_module():
    _same(lambda T: T.nn.Sequential(T.nn.ReLU()).set_submodule("0", 3))


def test_share_memory_returns_self_and_keeps_values():
    def program(T):
        model = T.nn.Sequential(T.nn.Linear(2, 3), T.nn.BatchNorm1d(3))
        weight = model[0].weight
        return model.share_memory() is model, model[0].weight is weight, model.state_dict()

    _same(program)


def test_share_memory_of_uninitialized_lazy_module():
    _same(lambda T: T.nn.LazyLinear(3).share_memory())


def test_shared_tensors_report_it_and_keep_their_layout():
    def program(T):
        model = T.nn.Linear(2, 3)
        before = model.weight.is_shared()
        model.share_memory()
        x = T.arange(12.0).reshape(3, 4).t()
        return (before, model.weight.is_shared(), model.bias.is_shared(),
                x.share_memory_() is x, x.is_shared(), x.stride(), x.tolist())

    _same(program)


def test_pin_memory_without_an_accelerator():
    """No accelerator exists: PyTorch's error, and a tensor is never pinned."""
    _same(lambda T: T.ones(2).pin_memory())
    _same(lambda T: T.ones(2).is_pinned())


def _add_one(model):
    with fusegrad.no_grad():
        for p in model.parameters():
            p.add_(1.0)


def test_forked_processes_write_into_shared_parameters():
    """Hogwild training: processes forked after `share_memory()` update the parent's
    parameters in place (each adds 1 here: the parent sees both)."""
    import multiprocessing

    model = fusegrad.nn.Linear(2, 2)
    before = model.weight.detach().clone()
    model.share_memory()
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_add_one, args=(model,)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert all(w.exitcode == 0 for w in workers)
    np.testing.assert_array_equal(model.weight.detach().numpy(), (before + 1 + 1).numpy())


# ---------------------------------------------------------------- Sequential


def _seq(T):
    return T.nn.Sequential(T.nn.Linear(1, 2), T.nn.ReLU(), T.nn.Linear(2, 3))


def _describe(seq):
    return repr(seq), list(seq._modules)


@pytest.mark.parametrize("key", [0, -1, 1, 3, -4, slice(0, 2), slice(None, None, 2)])
def test_sequential_pop(key):
    def program(T):
        seq = _seq(T)
        items = list(seq)
        popped = seq.pop(key)
        kept = [items.index(m) for m in seq]
        return repr(popped), _describe(seq), kept

    _same(program)


@pytest.mark.parametrize("factor", [1, 2, 3, 0, -1, 2.0, "2", True])
@pytest.mark.parametrize("form", ["mul", "rmul", "imul"])
def test_sequential_repetition(factor, form):
    def program(T):
        seq = _seq(T)
        items = list(seq)
        if form == "mul":
            out = seq * factor
        elif form == "rmul":
            out = factor * seq
        else:
            out = seq
            out *= factor
        return (_describe(out), out is seq, [items.index(m) for m in out],
                _describe(seq))

    _same(program)


def test_sequential_in_place_repetition_of_named_entries():
    def program(T):
        seq = T.nn.Sequential(OrderedDict(a=T.nn.ReLU(), b=T.nn.Tanh()))
        seq *= 1
        first = _describe(seq)
        seq *= 2
        return first, _describe(seq)

    _same(program)


@pytest.mark.parametrize("other", ["sequential", "list", "self"])
def test_sequential_in_place_add(other):
    def program(T):
        seq = _seq(T)
        given = {"sequential": T.nn.Sequential(T.nn.Tanh()), "list": [T.nn.Tanh()],
                 "self": seq}[other]
        seq += given
        return _describe(seq)

    _same(program)


def test_sequential_insert_and_dir():
    def program(T):
        seq = _seq(T)
        names = [n for n in dir(seq) if n.isdigit()]
        try:
            seq.insert(0, 3)
        except AssertionError as e:
            return names, str(e)

    _same(program)


# ---------------------------------------------------------------- ParameterList


def test_parameter_list_extend_and_iadd():
    def program(T):
        pl = T.nn.ParameterList([T.ones(2)])
        pl.extend([T.zeros(3), T.nn.Parameter(T.ones(1)), "text", 4])
        pl += (T.ones(2, 2),)
        same = pl.extend([]) is pl
        return (same, len(pl), [_plain(p) for p in pl], [n for n, _ in pl.named_parameters()],
                repr(pl), pl[-1], repr(pl[1:3]), repr(pl[::2]))

    _same(program)


@pytest.mark.parametrize("values", ["tensor", "int", "none"])
def test_parameter_list_extend_rejects(values):
    def program(T):
        pl = T.nn.ParameterList()
        pl.extend({"tensor": T.ones(2), "int": 3, "none": None}[values])

    _same(program)


@pytest.mark.parametrize("idx", [2, -3, 5, "0"])
def test_parameter_list_index_errors(idx):
    def program(T):
        pl = T.nn.ParameterList([T.ones(1), T.ones(2)])
        return pl[idx]

    _same(program)


def test_parameter_list_setitem_and_call():
    def program(T):
        pl = T.nn.ParameterList([T.ones(1), T.ones(2)])
        pl[0] = T.zeros(3)
        pl[-1] = "kept"
        out = [_plain(pl[0]), pl[1], [n for n, _ in pl.named_parameters()]]
        try:
            pl(T.ones(1))
        except RuntimeError as e:
            out.append(str(e))
        return out

    _same(program)


# ---------------------------------------------------------------- ParameterDict


def _pdict(T):
    return T.nn.ParameterDict(OrderedDict(b=T.ones(2), a=T.nn.Parameter(T.zeros(1)), c=3))


def _pd_state(pd):
    return list(pd.keys()), [n for n, _ in pd.named_parameters()], repr(pd)


def test_parameter_dict_reading_methods():
    def program(T):
        pd = _pdict(T)
        return (list(pd), list(reversed(pd)), list(pd.items()), list(pd.values()),
                pd.get("a"), pd.get("zz"), pd.get("zz", 5), "a" in pd, "zz" in pd, len(pd),
                _pd_state(pd))

    _same(program)


def test_parameter_dict_changing_methods():
    def program(T):
        pd = _pdict(T)
        out = [pd.pop("b"), _pd_state(pd), pd.popitem(), _pd_state(pd)]
        out += [pd.setdefault("a", T.ones(5)), pd.setdefault("n", T.ones(4)),
                pd.setdefault("m"), _pd_state(pd)]
        del pd["n"]
        out.append(_pd_state(pd))
        copy = pd.copy()
        out += [type(copy).__name__, copy is pd, copy["a"] is pd["a"], _pd_state(copy)]
        pd.clear()
        out += [_pd_state(pd), _pd_state(copy)]
        return out

    _same(program)


def test_parameter_dict_fromkeys_update_and_or():
    def program(T):
        pd = _pdict(T)
        fresh = pd.fromkeys(["x", "y"], T.ones(1))
        pd.update({"z": T.ones(1), "d": T.ones(2)})
        pd.update([("e", T.zeros(1))])
        merged = pd | fresh
        rmerged = fresh.__ror__(pd)
        fresh |= pd
        return (_pd_state(fresh), _pd_state(pd), _pd_state(merged), _pd_state(rmerged),
                fresh["x"] is merged["x"])

    _same(program)


@pytest.mark.parametrize("case", ["missing", "pop missing", "int key", "set int key",
                                  "update int", "update bad pair", "update short pair",
                                  "call", "del missing", "popitem empty", "dotted key"])
def test_parameter_dict_errors(case):
    def program(T):
        pd = _pdict(T)
        if case == "missing":
            return pd["zz"]
        if case == "pop missing":
            return pd.pop("zz")
        if case == "int key":
            return pd[1]
        if case == "set int key":
            try:
                pd[1] = T.ones(1)
            except TypeError as e:  # the key stays recorded, as in PyTorch
                return str(e), list(pd.keys())
        if case == "update int":
            pd.update(3)
        if case == "update bad pair":
            pd.update([3])
        if case == "update short pair":
            pd.update([("a",)])
        if case == "call":
            pd(T.ones(1))
        if case == "del missing":
            del pd["zz"]
        if case == "popitem empty":
            pd.clear()
            pd.popitem()
        if case == "dotted key":
            pd["a.b"] = T.ones(1)
        return _pd_state(pd)

    _same(program)


def test_parameter_dict_state_dict_and_assignment():
    def program(T):
        pd = _pdict(T)
        pd["a"] = T.full((2,), 4.0)
        pd["c"] = T.ones(1)
        return pd.state_dict(), _pd_state(pd)

    _same(program)


# ---------------------------------------------------------------- lazy 3-D modules


@pytest.mark.parametrize("name, args, shape", [
    ("LazyConv3d", (4, 2), (2, 3, 5, 5, 5)),
    ("LazyConv3d", (4, 3), (3, 5, 5, 5)),
    ("LazyConvTranspose3d", (4, 2), (2, 3, 4, 4, 4)),
    ("LazyConvTranspose3d", (4, 2), (3, 4, 4, 4)),
    ("LazyBatchNorm3d", (), (2, 3, 2, 2, 2)),
])
def test_lazy_3d_modules(name, args, shape):
    def program(T):
        m = getattr(T.nn, name)(*args)
        before = (repr(m), m.has_uninitialized_params(), type(m).__name__)
        x = T.randn(*shape)
        out = m(x)
        return (before, type(m).__name__, repr(m), out,
                [(n, tuple(p.shape)) for n, p in m.state_dict().items()])

    _same(program)


def test_lazy_3d_modules_are_public():
    for name in ("LazyConv3d", "LazyConvTranspose3d", "LazyBatchNorm3d"):
        assert name in fusegrad.nn.modules.__all__
        assert issubclass(getattr(fusegrad.nn, name), fusegrad.nn.modules.lazy.LazyModuleMixin)


# ---------------------------------------------------------------- MultiheadAttention


MHA_CONFIGS = {
    "self": ({}, "self"),
    "cross": ({}, "cross"),
    "kdim vdim": ({"kdim": 3, "vdim": 5}, "separate"),
    "batch first": ({"batch_first": True}, "self"),
    "bias kv zero attn": ({"add_bias_kv": True, "add_zero_attn": True}, "cross"),
    "no bias": ({"bias": False}, "self"),
}


def _mha_inputs(T, kind, batch_first):
    g = np.random.default_rng(0)
    shape = (2, 4, 6) if batch_first else (4, 2, 6)
    q = T.tensor(g.standard_normal(shape), dtype=T.float32)
    if kind == "self":
        return q, q, q
    if kind == "cross":
        kv = T.tensor(g.standard_normal((3, 2, 6)), dtype=T.float32)
        return q, kv, kv
    return (q, T.tensor(g.standard_normal((3, 2, 3)), dtype=T.float32),
            T.tensor(g.standard_normal((3, 2, 5)), dtype=T.float32))


def _mha_run(lib, kwargs, kind, need_weights):
    """(hook calls, output, weights) of a MultiheadAttention with torch's initial weights,
    its own and its out_proj's forward hooks recording their calls."""
    torch.manual_seed(0)
    twin = torch.nn.MultiheadAttention(6, 2, **kwargs)
    m = twin if lib is torch else fusegrad.nn.MultiheadAttention(6, 2, **kwargs)
    if lib is fusegrad:
        _copy_state(twin, m)
    calls = []
    m.out_proj.register_forward_hook(lambda *args: calls.append("out_proj"))
    m.register_forward_hook(lambda *args: calls.append("mha"))
    out, weights = m(*_mha_inputs(lib, kind, kwargs.get("batch_first", False)),
                     need_weights=need_weights)
    return calls, _plain(out), _plain(weights)


@pytest.mark.parametrize("config", list(MHA_CONFIGS))
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_does_not_call_out_proj(config, need_weights):
    kwargs, kind = MHA_CONFIGS[config]
    expected, got = (_mha_run(lib, kwargs, kind, need_weights) for lib in LIBS)
    assert got == expected
    assert "out_proj" not in got[0]


def test_multi_head_attention_forward_function_unchanged():
    torch.manual_seed(0)
    twin = torch.nn.MultiheadAttention(6, 2)
    m = fusegrad.nn.MultiheadAttention(6, 2)
    _copy_state(twin, m)
    outs = []
    for lib, mod in ((torch, twin), (fusegrad, m)):
        q, k, v = _mha_inputs(lib, "cross", False)
        outs.append(_plain(lib.nn.functional.multi_head_attention_forward(
            q, k, v, 6, 2, mod.in_proj_weight, mod.in_proj_bias, None, None, False, 0.0,
            mod.out_proj.weight, mod.out_proj.bias, training=False)))
    assert outs[1] == outs[0]


def _encoder_layer_run(lib, batch_first):
    """(forward hook calls of every submodule, output, input grad) of a
    TransformerEncoderLayer with torch's initial weights."""
    torch.manual_seed(0)
    twin = torch.nn.TransformerEncoderLayer(6, 2, dim_feedforward=8, dropout=0.0,
                                            batch_first=batch_first)
    layer = twin if lib is torch else fusegrad.nn.TransformerEncoderLayer(
        6, 2, dim_feedforward=8, dropout=0.0, batch_first=batch_first)
    if lib is fusegrad:
        _copy_state(twin, layer)
    calls = []
    for name, sub in layer.named_modules():
        sub.register_forward_hook(lambda *args, name=name: calls.append(name))
    src = _mha_inputs(lib, "self", batch_first)[0].requires_grad_()
    out = layer(src)
    out.sum().backward()
    return calls, _plain(out), _plain(src.grad)


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder_layer_hooks_and_values(batch_first):
    expected, got = (_encoder_layer_run(lib, batch_first) for lib in LIBS)
    assert got == expected
    assert "self_attn" in got[0] and "self_attn.out_proj" not in got[0]


# ---------------------------------------------------------------- messages


def test_group_norm_message():
    _same(lambda T: T.nn.GroupNorm(4, 6))
    _same(lambda T: T.nn.GroupNorm(3, 6).weight)


@pytest.mark.parametrize("dim, sizes, shape", [
    (1, (2, 3), (2, 5)), (1, (2, -1), (2, 5)), (1, (-1, -1), (2, 6)), (-1, (2, 3), (2, 5)),
    (5, (2, 3), (2, 5)), (1, (), (2, 5)), (1, (2, 0), (2, 6)), (1, (0, -1), (2, 0)),
    (1, (-2, 3), (2, 6)), (1, (-1, 4), (2, 6)), (0, (2, 3), ()), (1, (2,), (2, 5)),
    (1, (True, 5), (2, 5)), (1, [2, 3], (2, 6)), (1, (-1,), (2, 6)), (1, (2, -1), (2, 6)),
])
def test_unflatten_messages_and_values(dim, sizes, shape):
    _same(lambda T: T.nn.Unflatten(dim, sizes)(T.arange(float(np.prod(shape))).reshape(shape)))


@pytest.mark.parametrize("sizes", [[2, 3], (2, 3.0), 6, (2, "3")])
def test_unflatten_construction(sizes):
    def program(T):
        m = T.nn.Unflatten(1, sizes)
        return repr(m), m.unflattened_size

    _same(program)


@pytest.mark.parametrize("case", ["length", "batch", "unbatched", "separate", "separate ok",
                                  "no weights"])
def test_multihead_attention_key_value_shape_messages(case):
    def program(T):
        ones = T.ones
        if case.startswith("separate"):
            m = T.nn.MultiheadAttention(8, 2, kdim=4, vdim=6)
            value = ones(4 if case == "separate ok" else 5, 2, 6)
            out, _ = m(ones(3, 2, 8), ones(4, 2, 4), value)
            return tuple(out.shape)
        m = T.nn.MultiheadAttention(8, 2)
        if case == "length":
            return m(ones(3, 2, 8), ones(4, 2, 8), ones(5, 2, 8))
        if case == "batch":
            return m(ones(3, 2, 8), ones(4, 2, 8), ones(4, 3, 8))
        if case == "unbatched":
            return m(ones(3, 8), ones(4, 8), ones(5, 8))
        return m(ones(3, 2, 8), ones(4, 2, 8), ones(5, 2, 8), need_weights=False)

    _same(program)


def test_dropout2d_of_3d_input_warns_as_torch():

    def messages(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.functional.dropout2d(lib.ones(2, 3, 4), 0.5)
        return [(w.category, str(w.message)) for w in caught]

    assert messages(fusegrad) == messages(torch)
