"""Messages a user sees for bad input, word for word as PyTorch's: pack_padded_sequence's
lengths, ctc_loss's targets, multinomial's weights, MultivariateNormal's matrices, gradcheck's
precision warning, `.grad` assignment, linalg's error class; and `Tensor._is_view`."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import warnings  # noqa: E402

import pytest  # noqa: E402

import fusegrad  # noqa: E402

torch = pytest.importorskip("torch")


def _raised(fn, lib):
    """(exception type name, message) that `fn(lib)` raises; None if it returns."""
    try:
        fn(lib)
    except Exception as e:  # noqa: BLE001 - whatever is raised is compared
        return type(e).__name__, str(e)
    return None


def _same_error(fn):
    theirs = _raised(fn, torch)
    assert theirs is not None, "torch did not raise: the test is wrong"
    assert _raised(fn, fusegrad) == theirs


# ---------------------------------------------------------------- pack_padded_sequence


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32"])
def test_pack_padded_sequence_2d_lengths_names_the_int64_tensor(dtype):
    # pack_padded_sequence converts the lengths to int64 first, so the message says Long
    # whatever they came in as
    _same_error(lambda lib: lib.nn.utils.rnn.pack_padded_sequence(
        lib.zeros(5, 2, 3), lib.tensor([[5, 3]], dtype=getattr(lib, dtype))))


@pytest.mark.parametrize("lengths, sorted_", [
    ([[5, 3]], False), ([[[5]]], False), (5, False), (5, True), ([[3, 5]], False)])
def test_pack_padded_sequence_lengths_of_another_rank(lengths, sorted_):
    # unsorted: PyTorch sorts along the last dimension, and index_select refuses the
    # permutation of 2-D lengths before the op sees them
    _same_error(lambda lib: lib.nn.utils.rnn.pack_padded_sequence(
        lib.zeros(5, 1 if lengths == 5 else 2, 3), lib.tensor(lengths), enforce_sorted=sorted_))


def test_pack_padded_sequence_unsorted_still_packs():
    packed = [lib.nn.utils.rnn.pack_padded_sequence(
        lib.arange(30.0).reshape(5, 2, 3), lib.tensor([3, 5]), enforce_sorted=False)
        for lib in (fusegrad, torch)]
    for name in ("data", "batch_sizes", "sorted_indices", "unsorted_indices"):
        assert getattr(packed[0], name).tolist() == getattr(packed[1], name).tolist()


# ---------------------------------------------------------------- ctc_loss


def _ctc(targets, input_lengths=(5, 5), target_lengths=(2, 2), log_probs=(5, 2, 4),
         **kwargs):
    def run(lib):
        lp = lib.zeros(*log_probs).log_softmax(-1) if log_probs else lib.tensor(0.0)
        return lib.nn.functional.ctc_loss(lp, targets(lib), lib.tensor(input_lengths),
                                          lib.tensor(target_lengths), **kwargs)
    return run


@pytest.mark.parametrize("case", [
    _ctc(lambda lib: lib.ones(2, 2, 2, dtype=lib.long)),
    _ctc(lambda lib: lib.ones(2, 2, 2, 1, dtype=lib.long)),
    _ctc(lambda lib: lib.ones(2, 2, 2, dtype=lib.int32)),
    _ctc(lambda lib: lib.tensor(1)),
    _ctc(lambda lib: lib.tensor(1), target_lengths=(0, 0), reduction="none"),
    # the rank is checked before the blank and the lengths
    _ctc(lambda lib: lib.ones(2, 2, 2, dtype=lib.long), blank=9),
    _ctc(lambda lib: lib.ones(2, 2, 2, dtype=lib.long), input_lengths=(5, 5, 5)),
    _ctc(lambda lib: lib.tensor(1), input_lengths=(5,)),
    # unbatched: log_probs gets a batch dimension, the targets do not
    _ctc(lambda lib: lib.ones(1, 2, 2, dtype=lib.long), (5,), (2,), (5, 4)),
    _ctc(lambda lib: lib.tensor(1), (5,), (1,), (5, 4)),
    _ctc(lambda lib: lib.ones(2, dtype=lib.long), (5,), (1,), (5, 4)),
    # log_probs of the wrong rank: PyTorch's message counts the batch dimension it added
    _ctc(lambda lib: lib.ones(2, 2, dtype=lib.long), log_probs=(5, 2, 4, 1)),
    _ctc(lambda lib: lib.ones(2, 2, dtype=lib.long), log_probs=(5,)),
], ids=["3d", "4d", "3d-int32", "0d", "0d-empty", "3d-bad-blank", "3d-bad-lengths",
        "0d-bad-lengths", "unbatched-3d", "unbatched-0d", "unbatched-1d-too-long",
        "log-probs-4d", "log-probs-1d"])
def test_ctc_loss_rank_errors(case):
    _same_error(case)


def test_ctc_loss_unbatched_values_still_match():
    for targets, lengths, reduction in (([1, 2], [2], "none"), ([[1, 2, 3]], [2], "mean"),
                                        ([3], [1], "sum")):
        ours, theirs = (
            lib.nn.functional.ctc_loss(lib.linspace(-1, 1, 30, dtype=lib.float64)
                                       .reshape(6, 5).log_softmax(1), lib.tensor(targets),
                                       [6], lengths, reduction=reduction)
            for lib in (fusegrad, torch))
        assert ours.shape == theirs.shape
        assert abs(ours.item() - theirs.item()) < 1e-12


# ---------------------------------------------------------------- multinomial


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "bool",
                                   "complex64"])
def test_multinomial_refuses_non_floating_weights(dtype):
    _same_error(lambda lib: lib.multinomial(lib.ones(2, dtype=getattr(lib, dtype)), 1))
    _same_error(lambda lib: lib.ones(3, 2, dtype=getattr(lib, dtype)).multinomial(1, True))


@pytest.mark.parametrize("case", [
    lambda lib: lib.multinomial(lib.tensor(1), 1),  # the rank comes first
    lambda lib: lib.multinomial(lib.tensor([1, 2]), 5),  # the dtype before the count
    lambda lib: lib.multinomial(lib.tensor([1, 2]), 1, out=lib.empty(1)),  # and before out
    lambda lib: lib.multinomial(lib.tensor(1.0), 1, out=lib.empty(1)),
    lambda lib: lib.multinomial(lib.tensor([1.0, 2.0]), 1, out=lib.empty(1)),
    lambda lib: lib.multinomial(lib.tensor([1.0, 2.0]), 0),
    lambda lib: lib.multinomial(lib.tensor([1.0, 2.0]), -1, True),
    lambda lib: lib.multinomial(lib.tensor([1.0, 2.0]), 3),
], ids=["0d", "too-many", "out-float", "0d-out-float", "float-out-float", "zero", "negative",
        "float-too-many"])
def test_multinomial_check_order(case):
    _same_error(case)


def test_multinomial_floating_weights_and_categorical_still_sample():
    for lib in (fusegrad, torch):
        assert lib.multinomial(lib.ones(2, dtype=lib.float16), 1).dtype is lib.int64
        out = lib.empty(3, dtype=lib.long)
        assert lib.multinomial(lib.ones(2, 4), 3, out=out) is out
        # Categorical normalises integer probs to floating ones before it samples
        cat = lib.distributions.Categorical(probs=lib.tensor([1, 2]))
        assert cat.sample((3,)).shape == (3,)
    # an empty sample shape asks multinomial for no samples, which PyTorch refuses
    _same_error(lambda lib: lib.distributions.Categorical(probs=lib.tensor([0.3, 0.7]))
                .sample((0,)))


# ---------------------------------------------------------------- MultivariateNormal


@pytest.mark.parametrize("name", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_multivariate_normal_1d_matrix(name):
    _same_error(lambda lib: lib.distributions.MultivariateNormal(lib.zeros(3),
                                                                 **{name: lib.ones(3)}))


# ---------------------------------------------------------------- gradcheck


def _gradcheck_warnings(lib, dtype):
    x = lib.ones(3, dtype=getattr(lib, dtype), requires_grad=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        passed = lib.autograd.gradcheck(lambda a: a * 2, (x,), raise_exception=False)
    return passed, [(m.category.__name__, str(m.message)) for m in w
                    if "double precision" in str(m.message)]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "complex128"])
def test_gradcheck_precision_warning(dtype):
    # float64 and complex128 are the double types: neither warns
    assert _gradcheck_warnings(fusegrad, dtype) == _gradcheck_warnings(torch, dtype)


# ---------------------------------------------------------------- Tensor._is_view


@pytest.mark.parametrize("make", [
    lambda lib, x: x, lambda lib, x: x.t(), lambda lib, x: x.view(6), lambda lib, x: x[0],
    lambda lib, x: x.detach(), lambda lib, x: x.reshape(6), lambda lib, x: x.t().reshape(6),
    lambda lib, x: x[lib.tensor([0, 1])], lambda lib, x: x.unbind()[0],
    lambda lib, x: x.expand(2, 3, 2), lambda lib, x: x.clone(), lambda lib, x: x.contiguous(),
    lambda lib, x: x.t().t(), lambda lib, x: lib.view_as_real(x.to(lib.complex64)),
    lambda lib, x: lib.ones(3, 2, requires_grad=True),
    lambda lib, x: lib.ones(3, 2, requires_grad=True).t(),
    lambda lib, x: lib.nn.Parameter(lib.ones(2)),
])
def test_is_view(make):
    seen = []
    for lib in (fusegrad, torch):
        x = lib.ones(3, 2, requires_grad=True) * 1
        t = make(lib, x)
        seen.append((t._is_view(), t._base is not None))
    assert seen[0] == seen[1]
    assert seen[0][0] == seen[0][1]


# ---------------------------------------------------------------- .grad assignment


_DTYPES = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8",
           "int16", "int32", "int64", "uint8", "uint16", "bool"]


@pytest.mark.parametrize("mine", ["float64", "float32", "float16", "complex64", "int64"])
@pytest.mark.parametrize("given", _DTYPES)
def test_grad_assignment_of_another_dtype(mine, given):
    def assign(lib):
        t = lib.zeros(3, dtype=getattr(lib, mine))
        t.grad = lib.zeros(3, dtype=getattr(lib, given))
        return t.grad

    if mine == given:
        assert _raised(assign, fusegrad) is None and _raised(assign, torch) is None
    else:
        _same_error(assign)


@pytest.mark.parametrize("case", [
    # dtype and size both wrong: the dtype is reported
    lambda lib: setattr(lib.zeros(3, dtype=lib.float64, requires_grad=True), "grad",
                        lib.ones(4)),
    lambda lib: setattr(lib.zeros(3, dtype=lib.float64, requires_grad=True), "grad",
                        lib.ones(4, dtype=lib.float64)),
    lambda lib: setattr(lib.zeros(3, dtype=lib.float64, requires_grad=True), "grad",
                        lib.ones(3, 1, dtype=lib.float64)),
    lambda lib: setattr(lib.zeros(3, requires_grad=True) * 2, "grad",
                        lib.zeros(3, dtype=lib.float64)),
    lambda lib: setattr(lib.zeros(3, requires_grad=True), "grad", 3),
    lambda lib: setattr(lib.zeros(3, requires_grad=True), "grad", [1.0]),
], ids=["dtype-and-size", "size", "rank", "non-leaf", "int", "list"])
def test_grad_assignment_errors(case):
    _same_error(case)


# ---------------------------------------------------------------- linalg's error class


def _linalg_error(lib):
    """A singular matrix's error from linalg.inv: its class's names, repr, and the class
    after pickling."""
    import pickle

    with pytest.raises(lib.linalg.LinAlgError) as caught:
        lib.linalg.inv(lib.zeros(2, 2))
    cls = type(caught.value)
    again = type(pickle.loads(pickle.dumps(caught.value)))
    return (cls.__module__.split(".", 1)[1], cls.__qualname__, repr(caught.value),
            again is cls, lib._C._LinAlgError is cls, issubclass(cls, RuntimeError))


def test_linalg_error_named_as_torch():
    """`torch._C._LinAlgError` in reprs, tracebacks and pickles; the same class as
    `linalg.LinAlgError` (module named from its package down: `_C`)."""
    assert _linalg_error(fusegrad) == _linalg_error(torch)


# ---------------------------------------------------------------- training programs' slips

SLIPS = {
    "type('float')": lambda m: m.ones(2).type("float"),
    "type('bogus.Tensor')": lambda m: m.ones(2).type("bogus.Tensor"),
    "allclose of Long and Float": lambda m: m.allclose(m.tensor([1, 2]), m.tensor([1., 2.])),
    "isclose of Long and Float": lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1., 2.])),
    "SGD of a two-value lr": lambda m: m.optim.SGD([m.ones(2, requires_grad=True)],
                                                   lr=m.tensor([0.1, 0.2])),
    "RMSprop of a two-value lr": lambda m: m.optim.RMSprop([m.ones(2, requires_grad=True)],
                                                           lr=m.tensor([0.1, 0.2])),
    "Adagrad of a two-value lr": lambda m: m.optim.Adagrad([m.ones(2, requires_grad=True)],
                                                           lr=m.tensor([0.1, 0.2])),
    "Adam of a two-value lr": lambda m: m.optim.Adam([m.ones(2, requires_grad=True)],
                                                     lr=m.tensor([0.1, 0.2])),
    "manual_seed('x')": lambda m: m.manual_seed("x"),
}


@pytest.mark.parametrize("case", list(SLIPS))
def test_slips_as_pytorch(case):
    _same_error(SLIPS[case])


@pytest.mark.parametrize("seed", [1.5, "3", True, "tensor"])
def test_manual_seed_takes_what_int_takes(seed):
    def seeded(m):
        m.manual_seed(m.tensor(3) if seed == "tensor" else seed)
        return m.rand(3).tolist(), m.initial_seed()

    assert seeded(fusegrad) == seeded(torch)


def test_default_pickle_protocol():
    assert fusegrad.serialization.DEFAULT_PROTOCOL == torch.serialization.DEFAULT_PROTOCOL


@pytest.mark.parametrize("case", ["zeros", "ones", "empty", "full", "tensor", "randn"])
def test_a_dtype_that_is_no_dtype(case):
    calls = {"zeros": lambda m: m.zeros(2, dtype="float32"),
             "ones": lambda m: m.ones(2, dtype="float32"),
             "empty": lambda m: m.empty(2, dtype=3),
             "full": lambda m: m.full((2,), 1.0, dtype="float32"),
             "tensor": lambda m: m.tensor([1, 2], dtype="float32"),
             "randn": lambda m: m.randn(2, dtype="float32")}
    theirs, ours = _raised(calls[case], torch), _raised(calls[case], fusegrad)
    assert ours[0] == theirs[0] == "TypeError"
    # (PyTorch's several-signature factories list every signature; ours names the argument)
    assert ours[1] == theirs[1] or ours[1].endswith("argument 'dtype' must be torch.dtype, "
                                                     f"not {'int' if case == 'empty' else 'str'}")


def _warnings_of(fn, lib):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn(lib)
    return [(w.category.__name__, str(w.message).split(" (Triggered internally")[0],
             os.path.basename(w.filename)) for w in seen]


@pytest.mark.parametrize("case", ["new_tensor", "tensor"])
def test_copy_construct_warning_names_the_spelling(case):
    def call(m):
        src = m.tensor([1.0, 2.0])
        return m.ones(2).new_tensor(src) if case == "new_tensor" else m.tensor(src)

    assert _warnings_of(call, fusegrad) == _warnings_of(call, torch)


def test_list_of_arrays_warns_once():
    import numpy as np

    def call(m):
        m.tensor([np.array([1.0, 2.0]), np.array([3.0, 4.0])])
        m.tensor([[np.array([1.0])]])

    fusegrad._warn._state.given.discard(fusegrad._creation._LIST_OF_ARRAYS)
    ours = _warnings_of(call, fusegrad)
    assert len(ours) == 1 and ours[0][1].startswith("Creating a tensor from a list of numpy")
    assert ours[0][2] == "test_user_messages.py"


@pytest.mark.parametrize("data, weights_only", [
    (b"garbage", True), (b"", True), (b"", False), (b"not", False),
    (b"PK\x03\x04garbage", True), (b"\x80\x02}q\x00.", False), (b"\x80\x02}q\x00.", True)])
def test_load_of_what_is_no_checkpoint(data, weights_only):
    import io

    _same_error(lambda m: m.load(io.BytesIO(data), weights_only=weights_only))


def test_backward_pre_hook_alone_warns_when_no_input_requires_grad():
    def call(m):
        lin = m.nn.Linear(2, 1)
        lin.register_full_backward_pre_hook(lambda mod, grad_output: None)
        lin(m.ones(1, 2)).sum().backward()

    ours, theirs = _warnings_of(call, fusegrad), _warnings_of(call, torch)
    assert [w[:2] for w in ours] == [w[:2] for w in theirs] and len(ours) == 1


JOINS = {
    "stack of a tensor": lambda m: m.stack(m.ones(2, 3)),
    "cat of a generator": lambda m: m.cat(x for x in [m.ones(2)]),
    "stack with an int": lambda m: m.stack([m.ones(2), 1]),
    "cat with None": lambda m: m.cat([m.ones(2), None]),
    "cat of a tensor": lambda m: m.cat(m.ones(2, 3), dim=0),
    "hstack of a tensor": lambda m: m.hstack(m.ones(2, 3)),
    "vstack with an int": lambda m: m.vstack([m.ones(2), 3]),
    "cat of ints": lambda m: m.cat([1, 2]),
}


@pytest.mark.parametrize("case", list(JOINS))
def test_join_arguments(case):
    _same_error(JOINS[case])


def test_byte_mask_index_warns_each_time():
    def call(m):
        x = m.arange(4)
        mask = m.tensor([1, 0, 1, 0], dtype=m.uint8)
        assert x[mask].tolist() == [0, 2]
        m.arange(8).reshape(2, 4)[:, mask]

    ours, theirs = _warnings_of(call, fusegrad), _warnings_of(call, torch)
    assert [w[:2] for w in ours] == [w[:2] for w in theirs] and len(ours) == 2
    assert ours[0][2] == "test_user_messages.py"


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32", "bool", "float16",
                                   "uint8", "bfloat16"])
@pytest.mark.parametrize("how", ["setitem", "fill_", "full", "masked_fill"])
@pytest.mark.parametrize("value", [1 + 2j, 2 + 0j])
def test_complex_value_into_a_real_dtype(dtype, how, value):
    def call(m):
        dt = getattr(m, dtype)
        x = m.zeros(2, dtype=dt)
        if how == "setitem":
            x[0] = value
        elif how == "fill_":
            x.fill_(value)
        elif how == "full":
            x = m.full((2,), value, dtype=dt)
        else:
            x = x.masked_fill(m.tensor([True, False]), value)
        return x.tolist()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no NumPy ComplexWarning on the way)
        assert _raised(call, fusegrad) == _raised(call, torch)
        if _raised(call, torch) is None:
            assert call(fusegrad) == call(torch)


@pytest.mark.parametrize("expr", ["s * 2", "2 * s", "s + (4,)", "(4,) + s", "s + s", "s[:1]",
                                  "s * 0", "s + [4]", "s * 2.0"])
def test_size_arithmetic_keeps_size(expr):
    def run(m):
        out = eval(expr, {"s": m.Size([2, 3])})
        return type(out).__name__, tuple(out)

    assert _raised(run, fusegrad) == _raised(run, torch)
    if _raised(run, torch) is None:
        assert run(fusegrad) == run(torch)


@pytest.mark.parametrize("case", ["bins", "range"])
def test_histc_messages(case):
    _same_error(lambda m: m.histc(m.ones(3), bins=-1) if case == "bins" else
                m.histc(m.ones(3), bins=3, min=2, max=1))


def test_same_padding_of_an_even_kernel_warns_once():
    def call(m):
        conv = m.nn.Conv1d(2, 2, 2, padding="same")
        conv(m.ones(1, 2, 5))
        conv(m.ones(1, 2, 5))
        m.nn.functional.conv1d(m.ones(1, 2, 5), m.ones(2, 2, 4), padding="same")

    message = ("Using padding='same' with even kernel lengths and odd dilation may require a "
               "zero-padded copy of the input be created")
    fusegrad._warn._state.given.discard(message)
    ours, theirs = _warnings_of(call, fusegrad), _warnings_of(call, torch)
    assert [w[:2] for w in ours] == [("UserWarning", message)]
    # (PyTorch's is once per process too: an earlier test in this process may have had it.)
    assert [w[:2] for w in theirs] in ([], [("UserWarning", message)])


@pytest.mark.parametrize("name", ["Hardswish", "Hardsigmoid", "Mish", "SiLU", "ReLU6"])
def test_inplace_activation_reprs(name):
    assert repr(getattr(fusegrad.nn, name)(inplace=True)) == \
        repr(getattr(torch.nn, name)(inplace=True))


def test_backward_with_create_graph_warns_once():
    message = ("Using backward() with create_graph=True will create a reference cycle between "
               "the parameter and its gradient which can cause a memory leak. We recommend "
               "using autograd.grad when creating the graph to avoid this. If you have to use "
               "this function, make sure to reset the .grad fields of your parameters to None "
               "after use to break the cycle and avoid the leak.")

    def call(m):
        x = m.ones(2, requires_grad=True)
        (x * x).sum().backward(create_graph=True)
        (x * x).sum().backward(create_graph=True)
        m.autograd.grad((x * x).sum(), x, create_graph=True)

    fusegrad._warn._state.given.discard(message)
    ours = _warnings_of(call, fusegrad)
    assert [w[1] for w in ours] == [message] and ours[0][2] == "test_user_messages.py"


AUTOGRAD_SLIPS = {
    "set_grad_enabled of a string": lambda m: m.set_grad_enabled("yes"),
    "set_grad_enabled of an int": lambda m: m.set_grad_enabled(1),
    "detect_anomaly as a decorator": lambda m: m.autograd.detect_anomaly()(lambda: 1),
    "set_detect_anomaly as a decorator": lambda m: m.autograd.set_detect_anomaly(False)(
        lambda: 1),
}


@pytest.mark.parametrize("case", list(AUTOGRAD_SLIPS))
def test_autograd_slips(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (detect_anomaly's own warning)
        _same_error(AUTOGRAD_SLIPS[case])
    fusegrad.set_grad_enabled(True)


@pytest.mark.parametrize("anomaly", [False, True])
def test_inplace_modified_hint_follows_anomaly_mode(anomaly):
    def call(m):
        x = m.ones(2, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with m.autograd.set_detect_anomaly(anomaly):
                y = x.exp()
                y.add_(1)
                y.sum().backward()

    _same_error(call)


@pytest.mark.parametrize("where", ["cuda", "cuda:0", "device", "dict"])
def test_load_onto_cuda_without_cuda(where):
    import io

    def call(m):
        buf = io.BytesIO()
        m.save({"a": m.ones(2)}, buf)
        buf.seek(0)
        target = {"cuda": "cuda", "cuda:0": "cuda:0", "device": m.device("cuda"),
                  "dict": {"cpu": "cuda"}}[where]
        return m.load(buf, map_location=target)

    _same_error(call)


def test_complex_to_real_conversion_warns_once():
    message = "Casting complex values to real discards the imaginary part"

    def call(m):
        z = m.tensor([1 + 2j, 3 - 1j])
        assert z.to(m.float32).tolist() == [1.0, 3.0]
        z.float()

    fusegrad._warn._state.given.discard(message)
    ours = _warnings_of(call, fusegrad)
    assert [w[:2] for w in ours] == [("UserWarning", message)]
    assert ours[0][2] == "test_user_messages.py"
