"""nn.functional functions written in Python that read values on the CPU (noise drawn with
NumPy, masks and denominators read off the target, windows placed by drawn samples), run
on the meta device against PyTorch's: each program runs on both libraries, its result is
described (shape, dtype, strides, node name, device), then `.sum().backward()` and the
inputs' gradients are described; an error is compared by type and message."""

from __future__ import annotations

import warnings

import pytest
import torch

import fusegrad as fg


def _describe(o):
    """A result in a form both libraries print alike."""
    if isinstance(o, (tuple, list)):
        return [_describe(x) for x in o]
    fn = type(o.grad_fn).__name__ if o.grad_fn is not None else None
    return (tuple(o.shape), str(o.dtype).split(".")[-1], tuple(o.stride()), fn,
            str(o.device))


def _error(e: Exception) -> tuple:
    return ("error", type(e).__name__, str(e))


def _run(prog, T):
    """(the result's description, the gradients' descriptions), or an error for either."""
    made = []

    def m(*shape, dtype=None, grad=True):
        t = T.empty(*shape, device="meta", dtype=dtype or T.float32, requires_grad=grad)
        if grad:
            made.append(t)
        return t

    def idx(*shape):
        return T.empty(*shape, device="meta", dtype=T.int64)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = prog(T, m, idx)
        except Exception as e:  # noqa: BLE001 (compared with PyTorch's)
            return _error(e), None
        first = out[0] if isinstance(out, tuple) else out
        try:
            first.sum().backward()
            grads = [None if t.grad is None else
                     (tuple(t.grad.shape), str(t.grad.device), tuple(t.grad.stride()))
                     for t in made]
        except Exception as e:  # noqa: BLE001
            grads = _error(e)
    return _describe(out), grads


def _f(T):
    return T.nn.functional


CASES = {
    # gaussian_nll_loss: a meta var's check reads a value (PyTorch's error), a number's not
    "gaussian_nll_var_tensor": lambda T, m, i: _f(T).gaussian_nll_loss(m(4, 3), m(4, 3),
                                                                      m(4, 3)),
    "gaussian_nll_var_short": lambda T, m, i: _f(T).gaussian_nll_loss(
        m(4, 3), m(4, 3), m(4), reduction="none"),
    "gaussian_nll_var_float": lambda T, m, i: _f(T).gaussian_nll_loss(
        m(4, 3), m(4, 3), 0.5, reduction="none", full=True),
    "gaussian_nll_var_float_sum": lambda T, m, i: _f(T).gaussian_nll_loss(
        m(4, 3), m(4, 3), 2.0, reduction="sum"),
    # ctc_loss: lengths as lists run; as tensors PyTorch has no meta kernel
    "ctc_tensor_lengths": lambda T, m, i: _f(T).ctc_loss(
        m(10, 3, 6), i(3, 4), T.tensor([10, 10, 10]), T.tensor([4, 4, 4])),
    "ctc_meta_lengths": lambda T, m, i: _f(T).ctc_loss(m(10, 3, 6), i(3, 4), i(3), i(3)),
    "ctc_unbatched": lambda T, m, i: _f(T).ctc_loss(m(10, 6), i(4), [10], [4],
                                                    reduction="none"),
    # rrelu: the noise is a meta tensor, drawn or not
    "rrelu_eval": lambda T, m, i: _f(T).rrelu(m(3, 4)),
    "rrelu_train": lambda T, m, i: _f(T).rrelu(m(3, 4), training=True),
    "rrelu_train_double": lambda T, m, i: _f(T).rrelu(m(3, 4, dtype=T.float64), 0.1, 0.2,
                                                      training=True),
    "rrelu_inplace": lambda T, m, i: _f(T).rrelu_(m(3, 4) * 1, training=True),
    "rrelu_inplace_flag": lambda T, m, i: _f(T).rrelu(m(3, 4) * 1, training=True,
                                                      inplace=True),
    # fractional and 3-D adaptive max pooling: the windows' geometry only
    "fmp2_size": lambda T, m, i: _f(T).fractional_max_pool2d(m(2, 3, 8, 8), 2,
                                                             output_size=(4, 5)),
    "fmp2_indices": lambda T, m, i: _f(T).fractional_max_pool2d(
        m(2, 3, 8, 8), 3, output_size=4, return_indices=True),
    "fmp2_unbatched_ratio": lambda T, m, i: _f(T).fractional_max_pool2d(
        m(3, 9, 8), 2, output_ratio=(0.5, 0.75), return_indices=True),
    "fmp2_samples": lambda T, m, i: _f(T).fractional_max_pool2d(
        m(2, 3, 8, 8), 2, output_size=(4, 4), _random_samples=m(2, 3, 2, grad=False)),
    "fmp2_scalar_ratio": lambda T, m, i: _f(T).fractional_max_pool2d(m(2, 3, 8, 8), 2,
                                                                     output_ratio=0.5),
    "fmp2_too_large": lambda T, m, i: _f(T).fractional_max_pool2d(m(2, 3, 8, 8), 5,
                                                                  output_size=6),
    "fmp3_size": lambda T, m, i: _f(T).fractional_max_pool3d(m(2, 3, 8, 8, 8), 2,
                                                             output_size=(4, 3, 4)),
    "fmp3_indices_unbatched": lambda T, m, i: _f(T).fractional_max_pool3d(
        m(3, 8, 8, 8), 2, output_ratio=0.5, return_indices=True),
    "amp3": lambda T, m, i: _f(T).adaptive_max_pool3d(m(2, 3, 8, 7, 6), (3, None, 2)),
    "amp3_indices_unbatched": lambda T, m, i: _f(T).adaptive_max_pool3d(
        m(3, 8, 8, 8), 3, return_indices=True),
}

for _name, _shape in [("dropout1d", (2, 3, 4)), ("dropout1d", (3, 4)),
                      ("dropout2d", (2, 3, 4, 4)), ("dropout2d", (3, 4, 4)),
                      ("dropout3d", (2, 3, 4, 4, 4)), ("dropout3d", (3, 4, 4, 4)),
                      ("alpha_dropout", (2, 3, 4)), ("feature_alpha_dropout", (2, 3, 4, 4))]:
    for _p in (0.3, 1.0):
        for _inplace in (False, True):
            def _drop(T, m, i, name=_name, shape=_shape, p=_p, inplace=_inplace):
                x = m(*shape)
                return getattr(_f(T), name)(x * 1 if inplace else x, p, True, inplace)
            CASES[f"{_name}_{len(_shape)}d_p{_p}_inplace{_inplace}"] = _drop

for _red in ("mean", "sum", "none"):
    for _weighted in (False, True):
        for _ignore in (-100, 1):
            for _shape in ((4, 5), (4, 5, 3), (5,)):
                def _ce(T, m, i, red=_red, weighted=_weighted, ignore=_ignore, shape=_shape):
                    weight = m(shape[1] if len(shape) > 1 else shape[0], grad=False)
                    target = i(*(shape[:1] + shape[2:])) if len(shape) > 1 else i()
                    return _f(T).cross_entropy(m(*shape), target,
                                               weight=weight if weighted else None,
                                               ignore_index=ignore, reduction=red,
                                               label_smoothing=0.15)
                CASES[f"ce_smooth_{_red}_w{int(_weighted)}_ignore{_ignore}_{len(_shape)}d"] = _ce
    CASES[f"ctc_{_red}"] = lambda T, m, i, red=_red: _f(T).ctc_loss(
        m(10, 3, 6), i(3, 4), [10, 9, 8], [4, 3, 2], reduction=red)
    CASES[f"ctc_{_red}_zero_infinity"] = lambda T, m, i, red=_red: _f(T).ctc_loss(
        m(10, 3, 6), i(7), [10, 9, 8], [4, 3, 0], reduction=red, zero_infinity=True)
    CASES[f"ce_smooth_probs_{_red}"] = lambda T, m, i, red=_red: _f(T).cross_entropy(
        m(4, 5), m(4, 5), weight=m(5, grad=False), reduction=red, label_smoothing=0.1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_meta_matches_torch(name):
    prog = CASES[name]
    assert _run(prog, fg) == _run(prog, torch)


@pytest.mark.parametrize("mode,dims", [("bilinear", 2), ("nearest", 2), ("bicubic", 2),
                                       ("bilinear", 3), ("nearest", 3)])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_meta(mode, dims, padding_mode):
    """grid_sample on a meta grid has no values to check for NaN: PyTorch's geometry, node
    and gradients."""
    shape = (2, 3) + (5,) * dims
    gshape = (2,) + (4,) * dims + (dims,)

    def prog(T, m, i):
        return _f(T).grid_sample(m(*shape), m(*gshape), mode=mode, padding_mode=padding_mode,
                                 align_corners=False)

    assert _run(prog, fg) == _run(prog, torch)


@pytest.mark.parametrize("name", ["dropout2d_4d_p0.3_inplaceFalse", "alpha_dropout_3d_p0.3_"
                                  "inplaceFalse", "rrelu_train", "fmp2_size", "fmp3_size"])
def test_meta_draws_nothing(name):
    """A meta input draws no noise nor samples: the CPU generator is where it was, as in
    PyTorch."""
    after = []
    for T in (torch, fg):
        T.manual_seed(3)
        _run(CASES[name], T)
        after.append(T.rand(4).tolist())
        T.manual_seed(3)
        assert after[-1] == T.rand(4).tolist()
    assert after[0] == after[1]


@pytest.mark.parametrize("device", ["cpu", "meta"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "complex64"])
@pytest.mark.parametrize("fn", ["dropout", "dropout2d", "alpha_dropout",
                                "feature_alpha_dropout"])
def test_dropout_noise_dtype(device, dtype, fn):
    """Dropping out a tensor that is not floating: PyTorch's errors (the CPU's and the meta
    kernels' words differ), or a result of the input's dtype."""
    def prog(T):
        x = T.zeros(2, 3, 4, 4, device=device, dtype=getattr(T, dtype))
        return str(getattr(_f(T), fn)(x, 0.5, True).dtype)

    got = []
    for T in (fg, torch):
        try:
            got.append(prog(T))
        except Exception as e:  # noqa: BLE001
            got.append(_error(e))
    assert got[0] == got[1]


@pytest.mark.parametrize("var_shape", [(4, 3, 5, 5), (4, 1, 5, 5), (4, 1, 1, 5), (4, 3, 5),
                                       (4, 3, 5, 1), (1, 3, 5, 5), (3, 5, 5), (4, 3, 5, 2)])
@pytest.mark.parametrize("negative", [False, True])
def test_gaussian_nll_var_shapes_cpu(var_shape, negative):
    """The var's values are checked before its shape; a var may differ from the input in
    one dimension where its size is 1 (PyTorch's rule), on the CPU."""
    out = []
    for T in (fg, torch):
        T.manual_seed(0)
        x, y = T.rand(4, 3, 5, 5), T.rand(4, 3, 5, 5)
        var = (T.rand(*var_shape) + 0.1) * (-1 if negative else 1)
        try:
            out.append(_f(T).gaussian_nll_loss(x, y, var, reduction="none").tolist())
        except Exception as e:  # noqa: BLE001
            out.append(_error(e))
    if isinstance(out[1], list):  # (values to float32's rounding)
        assert torch.allclose(torch.tensor(out[0]), torch.tensor(out[1]), rtol=1e-5,
                              atol=1e-6)
    else:
        assert out[0] == out[1]


@pytest.mark.parametrize("ratio", [0.5, (0.5, 0.5), (0.5,), (0.5, 0.5, 0.5)])
def test_fractional_max_pool2d_ratio_cpu(ratio):
    """PyTorch's 2-D function takes the ratio's length: a number has none."""
    out = []
    for T in (fg, torch):
        T.manual_seed(0)
        try:
            out.append(_f(T).fractional_max_pool2d(T.rand(2, 3, 8, 8), 2,
                                                   output_ratio=ratio).tolist())
        except Exception as e:  # noqa: BLE001
            out.append(_error(e))
    assert out[0] == out[1]


@pytest.mark.parametrize("fn,shape", [("dropout1d", (3, 4)), ("dropout3d", (3, 4, 4, 4))])
@pytest.mark.parametrize("training", [False, True])
def test_unbatched_channel_dropout_in_place_cpu(fn, shape, training):
    """In place, an unbatched input gets its batch dimension added and removed in place
    (PyTorch's `SqueezeBackward4`): the result is the input, with its values and version."""
    seen = []
    for T in (fg, torch):
        T.manual_seed(0)
        x = T.randn(*shape, requires_grad=True)
        y = x * 1
        out = getattr(_f(T), fn)(y, 0.3, training, True)
        out.sum().backward()
        seen.append((out is y, type(out.grad_fn).__name__, out._version, tuple(out.shape),
                     [round(v, 5) for v in x.grad.reshape(-1).tolist()],
                     [round(v, 5) for v in out.detach().reshape(-1).tolist()]))
    assert seen[0] == seen[1]
