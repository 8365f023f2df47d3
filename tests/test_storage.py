"""Storages (`x.untyped_storage()`, `x.storage()`, `UntypedStorage`, `TypedStorage`, the
legacy `FloatStorage` classes) and `Tensor.set_` against PyTorch: the same values, sizes,
sharing of memory, reprs and errors."""

from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

import fusegrad

torch = pytest.importorskip("torch")

# Each case is an expression over `L` (the library) whose value both libraries must give
# alike; tensors compare by values, dtype and geometry, other values by their repr.
CASES = {
    "untyped nbytes of a view": "L.arange(6.).view(2, 3)[:, 1:].untyped_storage().nbytes()",
    "untyped shared by views": "(lambda t: t[1:].untyped_storage().data_ptr() "
                               "== t.untyped_storage().data_ptr())(L.arange(4.))",
    "one storage object per tensor": "(lambda t: t[1:].untyped_storage() "
                                     "is t.untyped_storage())(L.arange(4.))",
    "expanded nbytes": "L.ones(3).expand(2, 3).untyped_storage().nbytes()",
    "bytes of floats": "L.tensor([1.0, 2.0]).untyped_storage().tolist()",
    "byte read": "L.tensor([1.0, 2.0]).untyped_storage()[3]",
    "byte negative index": "L.tensor([1.0, 2.0]).untyped_storage()[-1]",
    "byte slice": "L.tensor([1.0, 2.0]).untyped_storage()[4:8].tolist()",
    "byte slice shares": "(lambda u: u[4:8].data_ptr() - u.data_ptr())"
                         "(L.tensor([1.0, 2.0]).untyped_storage())",
    "byte write": "(lambda t: (t.untyped_storage().__setitem__(3, 64), t)[1])"
                  "(L.tensor([1.0, 2.0]))",
    "byte write wraps": "(lambda t: (t.untyped_storage().__setitem__(0, 257), t)[1])"
                        "(L.tensor([1, 2], dtype=L.int32))",
    "byte fill": "(lambda t: (t.untyped_storage().fill_(0), t)[1])(L.tensor([1.0, 2.0]))",
    "untyped repr": "repr(L.tensor([1, 2], dtype=L.int16).untyped_storage())",
    "untyped of bytes": "L.UntypedStorage([1, 2, 300]).tolist()",
    "untyped size": "L.UntypedStorage(5).nbytes()",
    "untyped float": "L.tensor([1, 2], dtype=L.uint8).untyped_storage().float().tolist()",
    "untyped type": "L.ones(1).untyped_storage().type()",
    "untyped element_size": "L.ones(1).untyped_storage().element_size()",
    "untyped device": "L.ones(1).untyped_storage().device",
    "untyped get_device": "L.ones(1).untyped_storage().get_device()",
    "untyped clone": "(lambda u: (u.clone().data_ptr() != u.data_ptr(), u.clone().tolist()))"
                     "(L.tensor([3], dtype=L.uint8).untyped_storage())",
    "untyped copy_": "(lambda t: (t.untyped_storage().copy_(L.tensor([7.0]).untyped_storage()),"
                     " t)[1])(L.tensor([1.0]))",
    "untyped copy_ size": "L.ones(2).untyped_storage().copy_(L.ones(3).untyped_storage())",
    "untyped index error": "L.ones(2).untyped_storage()[8]",
    "untyped from_buffer": "L.UntypedStorage.from_buffer(b'abc', 'little', "
                           "dtype=L.uint8).tolist()",
    "typed of a view": "(lambda s: (s.size(), s.dtype, s.nbytes(), s.element_size()))"
                       "(L.arange(6.).view(2, 3)[:, 1:].storage())",
    "typed shares": "(lambda t: t.storage().data_ptr() == t.data_ptr())(L.arange(3.))",
    "typed read": "L.arange(6.).storage()[4]",
    "typed read complex": "L.tensor([1 + 2j]).storage()[0]",
    "typed read bool": "L.tensor([True, False]).storage().tolist()",
    "typed read bfloat16": "L.tensor([1.5], dtype=L.bfloat16).storage().tolist()",
    "typed write": "(lambda t: (t.storage().__setitem__(1, 9.5), t)[1])(L.arange(3.))",
    "typed write tensor": "(lambda t: (t.storage().__setitem__(0, L.tensor(7.)), t)[1])"
                          "(L.arange(3.))",
    "typed write slice": "(lambda t: (t.storage().__setitem__(slice(1, 3), 4), t)[1])"
                         "(L.arange(3.))",
    "typed slice": "L.arange(3.).storage()[0:2]",
    "typed bad index": "L.arange(3.).storage()[1.0]",
    "typed index error": "L.arange(3.).storage()[5]",
    "typed fill": "(lambda t: (t.storage().fill_(2), t)[1])(L.arange(3))",
    "typed repr": "repr(L.tensor([1.5, 2.0]).storage())",
    "typed conversion": "L.arange(3).storage().double().tolist()",
    "typed conversion type": "type(L.arange(3).storage().double()).__name__",
    "typed type": "L.arange(3).storage().type()",
    "typed pickle type": "L.ones(1, dtype=L.bool).storage().pickle_storage_type()",
    "typed untyped": "(lambda s: s.untyped() is s._untyped_storage)(L.ones(2).storage())",
    "typed copy_": "(lambda t: (t.storage().copy_(L.FloatStorage([5, 6])), t)[1])(L.ones(2))",
    "typed new": "L.TypedStorage([1, 2], dtype=L.int64).tolist()",
    "typed default dtype": "L.TypedStorage(3).dtype",
    "typed wrap": "L.TypedStorage(wrap_storage=L.tensor([1.0]).untyped_storage(), "
                  "dtype=L.int32).tolist()",
    "typed wrap partial": "L.TypedStorage(wrap_storage=L.ones(2).untyped_storage()[0:6], "
                          "dtype=L.int32).size()",
    "legacy new": "L.FloatStorage([1, 2]).tolist()",
    "legacy size": "L.LongStorage(3).size()",
    "legacy class": "(L.FloatStorage.__name__, L.LongStorage.dtype)",
    "legacy instance type": "type(L.FloatStorage([1])).__name__",
    "legacy isinstance": "(isinstance(L.ones(1).storage(), L.FloatStorage), "
                         "isinstance(L.ones(1).storage(), L.DoubleStorage), "
                         "isinstance(L.ones(1).storage(), L.TypedStorage), "
                         "isinstance(L.ones(1).untyped_storage(), L.TypedStorage))",
    "legacy from_buffer": "L.FloatStorage.from_buffer(b'\\x00\\x00\\x80\\x3f', 'little').tolist()",
    "legacy bad args": "L.FloatStorage(2.5)",
    "is_storage": "(L.is_storage(L.ones(1).storage()), L.is_storage(L.ones(1).untyped_storage()),"
                  " L.is_storage(L.ones(1)))",
    "set_ tensor": "(lambda a, x: (x.set_(a), x.data_ptr() == a.data_ptr(), x._version, "
                   "x._base is None)[1:])(L.arange(6.), L.zeros(2))",
    "set_ tensor geometry": "(lambda a, x: (x.set_(a[1:].view(2, 2)), x.stride(), "
                            "x.storage_offset(), x.shape)[1:])(L.arange(6.), L.zeros(2))",
    "set_ dtype mismatch": "L.zeros(2).set_(L.arange(3))",
    "set_ storage view": "(lambda a: L.zeros(2).set_(a.untyped_storage(), 1, (2, 2), (1, 1)))"
                         "(L.arange(6.))",
    "set_ storage contiguous": "(lambda a: L.zeros(2).set_(a.untyped_storage(), 1, (2, 2)))"
                               "(L.arange(6.))",
    "set_ whole untyped": "L.zeros(2, dtype=L.float64).set_(L.arange(6.).untyped_storage())",
    "set_ typed": "L.zeros(2).set_(L.arange(6.).storage())",
    "set_ typed mismatch": "L.zeros(2, dtype=L.int64).set_(L.arange(6.).storage())",
    "set_ out of bounds": "L.zeros(2).set_(L.arange(6.).untyped_storage(), 5, (2,))",
    "set_ nothing": "L.zeros(2).set_()",
    "set_ writes through": "(lambda a: (L.zeros(1).set_(a.untyped_storage(), 2, (2,)).mul_(10), "
                           "a)[1])(L.arange(6.))",
    "set_ keywords": "L.zeros(2).set_(source=L.arange(6.).untyped_storage(), storage_offset=2, "
                     "size=(2,), stride=(2,))",
    "set_ leaf": "L.zeros(2, requires_grad=True).set_(L.arange(2.))",
    "set_ leaf no_grad": "(lambda w: (L.no_grad().__enter__(), w.set_(L.arange(2.)), "
                         "L.set_grad_enabled(True), w.requires_grad, w.grad_fn)[3:])"
                         "(L.zeros(2, requires_grad=True))",
    "legacy constructor": "L.Tensor(L.FloatStorage([1., 2.]))",
    "legacy constructor shares": "(lambda s: L.FloatTensor(s).data_ptr() == s.data_ptr())"
                                 "(L.FloatStorage([1.]))",
    "legacy constructor dtype": "L.LongTensor(L.FloatStorage([1., 2.]))",
    "legacy constructor untyped": "L.Tensor(L.arange(3.).untyped_storage())",
    "new of a storage": "L.tensor([1.]).new(L.FloatStorage([3.]))",
    "set_ argument types": "L.zeros(2).set_(3)",
    "set_ tensor and offset": "L.zeros(2).set_(L.arange(6.), 1)",
    "set_ tensor geometry given": "L.zeros(2).set_(L.arange(6.), 1, (2,), (2,))",
    "set_ too many": "L.zeros(2).set_(L.arange(6.).untyped_storage(), 0, (2,), (1,), 7)",
    "storage of integers": "L.tensor([1, 2]).storage().tolist()",
    "storage size of a slice": "L.arange(4.)[2:].storage().size()",
}

# Where fusegrad differs by design: PyTorch's UntypedStorage(n) leaves its bytes unset (the
# case reads only the size), and a tensor with history may not be pointed elsewhere here.


def _outcome(lib, expr: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = eval(expr, {"L": lib})  # noqa: S307  (the cases above)
        except Exception as e:  # noqa: BLE001  (the error is the outcome)
            return ("error", type(e).__name__, str(e).split("\n")[0])
    return _plain(value)


def _plain(value):
    if isinstance(value, (fusegrad.Tensor, torch.Tensor)):
        return ("tensor", str(value.dtype), tuple(value.shape), tuple(value.stride()),
                value.storage_offset(), value.tolist())
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, (fusegrad.dtype, torch.dtype, fusegrad.device, torch.device)):
        return str(value)
    return repr(value)


@pytest.mark.parametrize("name", list(CASES))
def test_storage_as_torch(name):
    """The same outcome (value or error type and first line) as PyTorch's."""
    expr = CASES[name]
    assert _outcome(fusegrad, expr) == _outcome(torch, expr)


def test_typed_storage_warns_once_at_the_callers_line():
    """`x.storage()` gives PyTorch's deprecation warning once, naming this file."""
    from fusegrad import storage

    storage._TYPED_WARNED[0] = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fusegrad.ones(2).storage()
        fusegrad.ones(2).storage()
    assert len(caught) == 1 and caught[0].filename == __file__
    assert str(caught[0].message).startswith("TypedStorage is deprecated. It will be removed")


def test_pickle_and_copy_keep_values_not_memory():
    """Pickled and copied storages hold the values in new memory, as PyTorch's (whose
    UntypedStorage does not survive a plain pickle: fusegrad's does)."""
    for lib in (fusegrad, torch):
        t = lib.tensor([1.5, -2.0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for s in (t.untyped_storage(), t.storage()):
                copies = [copy.copy(s), copy.deepcopy(s)]
                if lib is fusegrad or isinstance(s, lib.TypedStorage):
                    copies.append(pickle.loads(pickle.dumps(s)))
                for other in copies:
                    assert type(other) is type(s) and other.tolist() == s.tolist()
                    assert other.data_ptr() != s.data_ptr()


def test_storage_of_numpy_memory():
    """A tensor made from a NumPy array: its storage is the array's memory."""
    a = np.arange(4, dtype=np.float32)
    u = fusegrad.from_numpy(a).untyped_storage()
    assert u.data_ptr() == a.ctypes.data and u.nbytes() == 16
    u[0] = 0x40  # the lowest byte of 0.0's little-endian float
    assert a[0] != 0
