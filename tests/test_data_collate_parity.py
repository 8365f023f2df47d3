"""utils.data against PyTorch: collation dtypes, autograd and container types; the
`_utils.collate` registry; `__getitems__`; the DataLoader's iterator objects; chained
iterable datasets; frozen loader attributes and the warnings PyTorch gives.

Each case is a function of the library (`torch` or `fusegrad`) run under both; what it
returns (in a canonical form: tensors as dtype, shape, values and autograd state), what it
raises and what it warns must be the same.
"""

from __future__ import annotations

import collections
import pickle
import types
import warnings

import numpy as np
import pytest
import torch

import fusegrad

LIBS = (torch, fusegrad)


def _canon(x):
    """`x` with tensors replaced by comparable tuples, containers by (type name, items)."""
    if isinstance(x, (torch.Tensor, fusegrad.Tensor)):
        grad_fn = x.grad_fn.name() if x.grad_fn is not None else None
        return ("tensor", str(x.dtype).split(".")[-1], tuple(x.shape), x.detach().tolist(),
                x.requires_grad, grad_fn)
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype.str, x.tolist())
    if isinstance(x, collections.abc.Mapping):
        return (type(x).__name__, [(k, _canon(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_canon(v) for v in x])
    return (type(x).__name__, x)


def _outcome(case, lib):
    """(result or error, warnings) of `case(lib)`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = ("ok", _canon(case(lib)))
        except Exception as exc:  # noqa: BLE001 - the error is what is compared
            result = ("raised", type(exc).__name__, str(exc))
    return result, [(w.category.__name__, str(w.message)) for w in caught]


def _same_as_torch(case):
    """Run `case` under both libraries; assert equal outcomes and return torch's."""
    theirs = _outcome(case, torch)
    assert _outcome(case, fusegrad) == theirs
    return theirs


def _collate(batch_of):
    """A case collating `batch_of(lib)` with the library's default_collate."""
    return lambda lib: lib.utils.data.default_collate(batch_of(lib))


# ------------------------------------------------------------------ dtypes of collated numbers

NUMBER_BATCHES = {
    "int_then_float": lambda lib: [1, 2.5],
    "float_then_int": lambda lib: [2.5, 1],
    "bool_then_int": lambda lib: [True, 2],
    "int_then_bool": lambda lib: [2, True],
    "bools": lambda lib: [True, False],
    "ints": lambda lib: [3, -4],
    "floats": lambda lib: [0.5, -1.25],
    "float_then_bool": lambda lib: [0.5, True],
    "int_overflow": lambda lib: [1, 2 ** 63],
    "np_f32_f64": lambda lib: [np.float32(1), np.float64(2.5)],
    "np_i32_f64": lambda lib: [np.int32(1), np.float64(2.5)],
    "np_i32": lambda lib: [np.int32(1), np.int32(2)],
    "np_bool": lambda lib: [np.bool_(True), np.bool_(False)],
    "np_f64_subclass_of_float": lambda lib: [np.float64(1.5), np.float64(2)],
    "np_arrays_int_float": lambda lib: [np.array(1), np.array(2.5)],
    "np_arrays_f32": lambda lib: [np.ones(3, np.float32), np.zeros(3, np.float32)],
    "np_arrays_i16_2d": lambda lib: [np.ones((2, 2), np.int16), np.zeros((2, 2), np.int16)],
    "np_arrays_shape_mismatch": lambda lib: [np.ones(2), np.ones(3)],
    "np_string_arrays": lambda lib: [np.array(["a"]), np.array(["b"])],
    "np_object_arrays": lambda lib: [np.array([1], dtype=object)],
    "np_str_scalars": lambda lib: [np.str_("a"), np.str_("b")],
    "strings": lambda lib: ["a", "b"],
    "bytes": lambda lib: [b"a", b"b"],
    "complex": lambda lib: [1j, 2j],
    "none": lambda lib: [None, None],
}


@pytest.mark.parametrize("batch_of", [pytest.param(b, id=n) if callable(b) else
                                      pytest.param(*b.values, marks=b.marks, id=n)
                                      for n, b in NUMBER_BATCHES.items()])
def test_numbers_and_arrays_collate_with_torch_dtypes(batch_of):
    _same_as_torch(_collate(batch_of))


def test_mixed_python_numbers_promote_instead_of_truncating():
    (status, tensor), _ = _same_as_torch(_collate(NUMBER_BATCHES["int_then_float"]))
    assert status == "ok" and tensor[1] == "float32" and tensor[3] == [1.0, 2.5]


TENSOR_BATCHES = {
    "int_then_float": lambda lib: [lib.tensor(1), lib.tensor(2.5)],
    "float_then_int": lambda lib: [lib.tensor(1.5), lib.tensor(2)],
    "f32_then_f64": lambda lib: [lib.tensor([1.5]), lib.tensor([2.0], dtype=lib.float64)],
    "bool_then_int": lambda lib: [lib.tensor(True), lib.tensor(2)],
    "u8_then_i8": lambda lib: [lib.tensor([1], dtype=lib.uint8),
                               lib.tensor([-1], dtype=lib.int8)],
    "same_dtype_rows": lambda lib: [lib.arange(6.0).reshape(2, 3)[0],
                                    lib.arange(6.0).reshape(2, 3)[1]],
    "non_contiguous": lambda lib: [lib.arange(6).reshape(2, 3).t(),
                                   lib.arange(6).reshape(2, 3).t()],
    "shape_mismatch": lambda lib: [lib.ones(2), lib.ones(3)],
    "tuples_of_mixed": lambda lib: [(lib.tensor(1), 1.5), (lib.tensor(2.5), 2)],
}


@pytest.mark.parametrize("name", list(TENSOR_BATCHES))
def test_tensor_batches_follow_torch_stack(name):
    _same_as_torch(_collate(TENSOR_BATCHES[name]))


def test_mixed_dtype_tensors_hold_promoted_values():
    out = fusegrad.utils.data.default_collate([fusegrad.tensor(1), fusegrad.tensor(2.5)])
    assert out.dtype == fusegrad.float32
    assert out.numpy().dtype == np.float32 and out.tolist() == [1.0, 2.5]


# -------------------------------------------------------------------------------- autograd

def _grad_case(lib):
    a = lib.ones(2, requires_grad=True)
    b = lib.zeros(2)
    out = lib.utils.data.default_collate([(a, 1), (b, 2)])
    (out[0] * lib.tensor([[1.0], [3.0]])).sum().backward()
    return out, a.grad


def test_collated_tensors_keep_autograd():
    (status, (_, (batch, grad))), _ = _same_as_torch(_grad_case)
    assert status == "ok"
    assert batch[1][0][5] == "StackBackward0"
    assert grad[3] == [1.0, 1.0]


def test_collating_parameters_and_no_grad_batches():
    _same_as_torch(_collate(lambda lib: [lib.nn.Parameter(lib.ones(2)),
                                         lib.nn.Parameter(lib.zeros(2))]))

    def under_no_grad(lib):
        with lib.no_grad():
            return lib.utils.data.default_collate([lib.ones(2, requires_grad=True)] * 2)

    _same_as_torch(under_no_grad)


def test_modes_see_the_same_calls_as_in_torch():
    def recorded(lib):
        class Recorder(lib.overrides.TorchFunctionMode):
            def __init__(self):
                super().__init__()
                self.names = []

            def __torch_function__(self, func, types, args=(), kwargs=None):
                self.names.append(getattr(func, "__name__", str(func)))
                return func(*args, **(kwargs or {}))

        samples = [(lib.ones(2), 1, 2.5, np.float32(1), np.ones(2)),
                   (lib.zeros(2), 2, 3.5, np.float32(2), np.ones(2))]
        rec = Recorder()
        with rec:
            out = lib.utils.data.default_collate(samples)
        return out, rec.names

    _same_as_torch(recorded)


# ---------------------------------------------------------------------- container types

def _defaultdicts(lib):
    first, second = collections.defaultdict(list), collections.defaultdict(list)
    first["a"], second["a"] = 1, 2
    out = lib.utils.data.default_collate([first, second])
    return out, out.default_factory is list


class _Sub(list):
    pass


class _Pair(list):
    def __init__(self, a, b):  # a constructor collate cannot call with one list
        super().__init__([a, b])


Point = collections.namedtuple("Point", ["x", "y"])

CONTAINER_BATCHES = {
    "ordered_dict": lambda lib: [collections.OrderedDict(a=1), collections.OrderedDict(a=2)],
    "mappingproxy": lambda lib: [types.MappingProxyType({"a": 1}),
                                 types.MappingProxyType({"a": 2})],
    "list_subclass": lambda lib: [_Sub([1, 2]), _Sub([3, 4])],
    "list_subclass_odd_init": lambda lib: [_Pair(1, 2), _Pair(3, 4)],
    "ranges": lambda lib: [range(2), range(2, 4)],
    "tuples": lambda lib: [(1, "a"), (2, "b")],
    "namedtuples": lambda lib: [Point(1, "s"), Point(2, "t")],
    "nested": lambda lib: [{"a": [1, (2.5, "x")]}, {"a": [3, (4.5, "y")]}],
    "uneven_lists": lambda lib: [[1, 2], [1]],
}


def test_defaultdict_samples_collate_like_torch():
    _same_as_torch(_defaultdicts)


@pytest.mark.parametrize("name", list(CONTAINER_BATCHES))
def test_container_batches(name):
    _same_as_torch(_collate(CONTAINER_BATCHES[name]))


CONVERT_INPUTS = {
    "np_scalar_in_dict": lambda lib: {"a": np.float64(2.0)},
    "int32_array": lambda lib: np.array([1, 2], dtype=np.int32),
    "string_array": lambda lib: np.array(["a"]),
    "str_scalar": lambda lib: np.str_("a"),
    "np_bool": lambda lib: np.bool_(True),
    "np_int16": lambda lib: np.int16(3),
    "tuple": lambda lib: (np.array(1), 2),
    "namedtuple": lambda lib: Point(np.array(1), "s"),
    "list_subclass": lambda lib: _Sub([np.array(1)]),
    "defaultdict": lambda lib: collections.defaultdict(int, a=np.int64(1)),
    "mappingproxy": lambda lib: types.MappingProxyType({"a": np.array(1.5)}),
    "range": lambda lib: range(3),
    "string": lambda lib: "ab",
    "tensor": lambda lib: lib.ones(2),
}


@pytest.mark.parametrize("name", list(CONVERT_INPUTS))
def test_default_convert(name):
    def case(lib):
        data = CONVERT_INPUTS[name](lib)
        out = lib.utils.data.default_convert(data)
        return out, type(out).__name__

    _same_as_torch(case)


# ------------------------------------------------------------------ the collate registry

class _Custom:
    def __init__(self, v):
        self.v = v


def test_collate_module_and_registry():
    for lib in LIBS:
        mod = lib.utils.data._utils.collate
        assert callable(mod.collate) and callable(mod.default_collate)
        assert mod.default_collate is lib.utils.data.default_collate
        assert lib.utils.data.dataloader.get_worker_info() is None
        assert lib.utils.data._utils.worker.get_worker_info() is None

    def keys(lib):
        return [k.__name__ if isinstance(k, type) else tuple(t.__name__ for t in k)
                for k in lib.utils.data._utils.collate.default_collate_fn_map]

    _same_as_torch(keys)

    def registered(lib):
        fn_map = lib.utils.data._utils.collate.default_collate_fn_map
        fn_map[_Custom] = lambda batch, *, collate_fn_map: sum(c.v for c in batch)
        try:
            return lib.utils.data.default_collate([(_Custom(1), 2), (_Custom(3), 4)])
        finally:
            del fn_map[_Custom]

    _same_as_torch(registered)

    def own_map(lib):
        collate = lib.utils.data._utils.collate.collate
        ints = {int: lambda batch, *, collate_fn_map: "ints"}
        return collate([1, 2], collate_fn_map=ints), collate([(1,), (2,)], collate_fn_map=ints)

    _same_as_torch(own_map)
    _same_as_torch(lambda lib: lib.utils.data._utils.collate.collate([1, 2]))

    def tensor_override(lib):  # a Tensor entry also collates NumPy arrays (made tensors)
        mod = lib.utils.data._utils.collate
        fn_map = dict(mod.default_collate_fn_map)
        fn_map[lib.Tensor] = lambda batch, *, collate_fn_map: len(batch)
        return mod.collate([np.ones(2), np.ones(2)], collate_fn_map=fn_map)

    _same_as_torch(tensor_override)


# --------------------------------------------------------------------------- __getitems__

class _Batched:
    """A dataset that can only be read a batch at a time (as Hugging Face datasets are)."""

    def __init__(self, base):
        self.calls = []

    def __len__(self):
        return 10

    def __getitem__(self, i):
        raise RuntimeError("__getitem__ called")

    def __getitems__(self, indices):
        self.calls.append(list(indices))
        return [{"x": i, "y": float(i)} for i in indices]


def _batched_dataset(lib):
    return type("Batched", (_Batched, lib.utils.data.Dataset), {})(None)


def test_loader_fetches_batches_with_getitems():
    def loaded(lib):
        ds = _batched_dataset(lib)
        return list(lib.utils.data.DataLoader(ds, batch_size=4)), ds.calls

    _same_as_torch(loaded)

    def through_subset(lib):
        ds = _batched_dataset(lib)
        sub = lib.utils.data.Subset(ds, [9, 8, 7, 6, 5])
        return list(lib.utils.data.DataLoader(sub, batch_size=2)), ds.calls

    _same_as_torch(through_subset)


def test_workers_fetch_with_getitems():
    def loaded(lib):
        return list(lib.utils.data.DataLoader(_batched_dataset(lib), batch_size=4,
                                              num_workers=2))

    _same_as_torch(loaded)


def test_subset_getitems():
    _same_as_torch(lambda lib: lib.utils.data.Subset(list(range(10)), [5, 6, 7])
                   .__getitems__([0, 2]))
    _same_as_torch(lambda lib: list(lib.utils.data.DataLoader(
        lib.utils.data.Subset(list(range(10)), [5, 6]), batch_size=None)))

    def overriding_getitem_only(lib):
        cls = type("Sub", (lib.utils.data.Subset,), {"__getitem__": lambda self, i: 0})
        return cls(list(range(3)), [0])

    _same_as_torch(overriding_getitem_only)

    def overriding_both(lib):
        cls = type("Sub", (lib.utils.data.Subset,), {
            "__getitem__": lambda self, i: 0,
            "__getitems__": lambda self, idx: [0] * len(idx)})
        return list(lib.utils.data.DataLoader(cls(list(range(3)), [0, 1]), batch_size=2))

    _same_as_torch(overriding_both)


def test_stack_dataset_getitems():
    def stacked(lib):
        d = lib.utils.data
        return (d.StackDataset(_batched_dataset(lib), list(range(10))).__getitems__([1, 2]),
                d.StackDataset(a=_batched_dataset(lib), b=list(range(10))).__getitems__([3]))

    _same_as_torch(stacked)

    def short(lib):
        cls = type("Short", (lib.utils.data.Dataset,), {
            "__len__": lambda self: 4, "__getitems__": lambda self, idx: [1]})
        return lib.utils.data.StackDataset(cls(), cls()).__getitems__([1, 2])

    _same_as_torch(short)


# ---------------------------------------------------------------------- iterator objects

def _tensor_dataset(lib):
    return lib.utils.data.TensorDataset(lib.arange(10), lib.arange(10) * 2)


def test_iterator_objects_have_len_and_torch_names():
    def single(lib):
        loader = lib.utils.data.DataLoader(_tensor_dataset(lib), batch_size=3)
        it = iter(loader)
        first = next(it)
        return (len(it), type(it).__name__, iter(it) is it, first, list(it),
                len(iter(lib.utils.data.DataLoader(_tensor_dataset(lib), batch_size=None))))

    _same_as_torch(single)

    def workers(lib):
        it = iter(lib.utils.data.DataLoader(_tensor_dataset(lib), batch_size=3, num_workers=2))
        return len(it), type(it).__name__, [b[0] for b in it]

    _same_as_torch(workers)
    _same_as_torch(lambda lib: pickle.dumps(iter(lib.utils.data.DataLoader(
        _tensor_dataset(lib)))))


class _Count:
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def _counting(lib, n):
    return type("Count", (_Count, lib.utils.data.IterableDataset), {})(n)


def test_iterable_dataset_loaders():
    def shapes(lib):
        loader = lib.utils.data.DataLoader(_counting(lib, 5), batch_size=2)
        return (type(loader.sampler).__name__, type(loader.batch_sampler).__name__,
                len(loader), list(loader),
                list(lib.utils.data.DataLoader(_counting(lib, 5), batch_size=2,
                                               drop_last=True)),
                list(lib.utils.data.DataLoader(_counting(lib, 3), batch_size=None)))

    _same_as_torch(shapes)
    _same_as_torch(lambda lib: len(iter(lib.utils.data.DataLoader(_counting(lib, 5),
                                                                    batch_size=2))))


def test_iterable_datasets_add_to_a_chain():
    def chained(lib):
        chain = _counting(lib, 2) + _counting(lib, 3)
        return (type(chain).__name__, list(chain), len(chain),
                list(lib.utils.data.DataLoader(chain, batch_size=2)))

    _same_as_torch(chained)


# ------------------------------------------------------- loader attributes and warnings

@pytest.mark.parametrize("attr", ["batch_size", "batch_sampler", "sampler", "drop_last",
                                  "dataset", "persistent_workers", "num_workers",
                                  "collate_fn", "timeout", "generator", "pin_memory"])
def test_setting_loader_attributes(attr):
    def set_again(lib):
        loader = lib.utils.data.DataLoader(_tensor_dataset(lib), batch_size=3)
        setattr(loader, attr, getattr(loader, attr))
        return "set"

    _same_as_torch(set_again)


def test_setting_batch_size_after_construction_raises():
    loader = fusegrad.utils.data.DataLoader(_tensor_dataset(fusegrad))
    with pytest.raises(ValueError, match="batch_size attribute should not be set after "
                                         "DataLoader is initialized"):
        loader.batch_size = 3


def test_random_split_warns_of_empty_splits():
    def split(lengths, n=3):
        def case(lib):
            g = lib.Generator().manual_seed(0)
            return [list(s) for s in lib.utils.data.random_split(range(n), lengths,
                                                                 generator=g)]
        return case

    _, caught = _same_as_torch(split([0.1, 0.1, 0.8]))
    assert caught == [("UserWarning", "Length of split at index 1 is 0. This might result "
                                      "in an empty dataset.")]
    _, caught = _same_as_torch(split([0, 3]))  # explicit lengths: no warning
    assert caught == []
    _same_as_torch(split([0.3, 0.7], n=10))


def test_pin_memory_without_accelerator_warns():
    def pinned(lib, **kw):
        loader = lib.utils.data.DataLoader(_tensor_dataset(lib), batch_size=3,
                                           pin_memory=True, **kw)
        return next(iter(loader))

    _, caught = _same_as_torch(pinned)
    assert caught == [("UserWarning", "'pin_memory' argument is set as true but no "
                                      "accelerator is found, then device pinned memory "
                                      "won't be used.")]
    _same_as_torch(lambda lib: pinned(lib, pin_memory_device="cuda"))


@pytest.mark.parametrize("kwargs", [
    {"num_workers": 2},
    {"num_workers": 2, "prefetch_factor": -1},
    {"multiprocessing_context": "spawn"},
    {"num_workers": 1, "multiprocessing_context": "bogus"},
    {"num_workers": 1, "multiprocessing_context": 3},
    {"num_workers": 1, "multiprocessing_context": "fork"},
])
def test_loader_options(kwargs):
    def made(lib):
        loader = lib.utils.data.DataLoader(_tensor_dataset(lib), **kwargs)
        return loader.prefetch_factor, type(loader.multiprocessing_context).__name__

    _same_as_torch(made)


def test_single_process_timeout_and_iterable_options():
    _same_as_torch(lambda lib: next(iter(lib.utils.data.DataLoader(
        _tensor_dataset(lib), batch_size=3, timeout=2))))
    for kw in ({"shuffle": True}, {"sampler": [1]}, {"batch_sampler": [[1]]}):
        _same_as_torch(lambda lib, kw=kw: lib.utils.data.DataLoader(_counting(lib, 3), **kw))


def test_generic_classes_and_concat_helpers():
    d = fusegrad.utils.data
    assert d.Dataset[int].__origin__ is d.Dataset
    assert d.DataLoader[int].__origin__ is d.DataLoader
    assert d.Sampler[int].__origin__ is d.Sampler
    _same_as_torch(lambda lib: (lib.utils.data.ConcatDataset([[1], [2, 3]]).cummulative_sizes,
                                lib.utils.data.ConcatDataset.cumsum([[1], [2, 3]])))


class _WhoAmI:
    def __len__(self):
        return 2

    def __getitem__(self, i):
        info = self._lib.utils.data.get_worker_info()
        try:
            info.id = 3
            refused = None
        except Exception as exc:  # noqa: BLE001 - the error is what is compared
            refused = type(exc).__name__
        return (info.id, info.num_workers, info.rng, info.worker_method, refused,
                type(info).__name__, hasattr(info, "__dict__"))


def test_worker_info_fields():
    def seen(lib):
        ds = type("WhoAmI", (_WhoAmI, lib.utils.data.Dataset), {"_lib": lib})()
        return list(lib.utils.data.DataLoader(ds, batch_size=None, num_workers=2))

    _same_as_torch(seen)
