"""A reduction's result has a new tensor's row-major strides, as PyTorch allocates it, also
for a permuted or channels_last input (NumPy's follow the input's memory order), so `view`
works on it where it works in PyTorch."""

from __future__ import annotations

import pytest

import fusegrad

torch = pytest.importorskip("torch")

REDUCTIONS = {
    "sum": lambda L, t, d, k: t.sum(d, keepdim=k),
    "sum float64": lambda L, t, d, k: t.sum(d, keepdim=k, dtype=L.float64),
    "mean": lambda L, t, d, k: t.mean(d, keepdim=k),
    "mean float64": lambda L, t, d, k: t.mean(d, keepdim=k, dtype=L.float64),
    "nansum": lambda L, t, d, k: t.nansum(d, keepdim=k),
    "nanmean": lambda L, t, d, k: t.nanmean(d, keepdim=k),
    "amax": lambda L, t, d, k: t.amax(d, keepdim=k),
    "amin": lambda L, t, d, k: t.amin(d, keepdim=k),
    "var": lambda L, t, d, k: t.var(d, keepdim=k),
    "std": lambda L, t, d, k: t.std(d, keepdim=k),
    "var_mean": lambda L, t, d, k: L.var_mean(t, d, keepdim=k),
    "std_mean": lambda L, t, d, k: L.std_mean(t, d, keepdim=k),
    "logsumexp": lambda L, t, d, k: t.logsumexp(d, keepdim=k),
    "norm": lambda L, t, d, k: t.norm(dim=d, keepdim=k),
    "vector_norm inf": lambda L, t, d, k: L.linalg.vector_norm(t, float("inf"), d, k),
    "aminmax": lambda L, t, d, k: L.aminmax(t, dim=d, keepdim=k),
    "count_nonzero": lambda L, t, d, k: L.count_nonzero(t, d),
    "max": lambda L, t, d, k: t.max(d, keepdim=k),
    "argmax": lambda L, t, d, k: t.argmax(d, keepdim=k),
    "prod": lambda L, t, d, k: t.prod(d, keepdim=k),
    "half sum": lambda L, t, d, k: t.half().sum(d, keepdim=k),
}


def _inputs(L):
    x = L.arange(120.0).reshape(2, 3, 4, 5)
    return {"channels_last": x.contiguous(memory_format=L.channels_last),
            "transposed": x.transpose(1, 3),
            "permuted": L.arange(120.0).reshape(4, 5, 6).permute(2, 0, 1)}


def _strides(L, name, dim, keepdim):
    out = []
    for t in _inputs(L).values():
        r = REDUCTIONS[name](L, t, dim if dim < t.dim() else 0, keepdim)
        out.append([v.stride() for v in r] if isinstance(r, tuple) else r.stride())
    return out


@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reduction_strides_as_torch(name, dim, keepdim):
    assert _strides(fusegrad, name, dim, keepdim) == _strides(torch, name, dim, keepdim)


@pytest.mark.parametrize("lib", [fusegrad, torch], ids=["fusegrad", "torch"])
def test_keepdim_sum_of_channels_last_views(lib):
    """The case a user met: summing a channels_last batch over its height, then `view`."""
    x = lib.arange(120.0).reshape(2, 3, 4, 5).contiguous(memory_format=lib.channels_last)
    s = x.sum(2, keepdim=True)
    assert s.is_contiguous() and s.view(2, -1).tolist() == x.sum(2).reshape(2, -1).tolist()
