"""LeNet-5's convolution, ReLU and max-pool kernels, fusegrad beside PyTorch, on the training
step's shapes (batch 64).

Each row times fusegrad's kernel on NumPy arrays (`ops.conv`, `ops.unary`, `ops.pooling`) and
PyTorch's ATen call on the same arrays (`aten.convolution`, `aten.convolution_backward`,
`aten.relu`, `aten.threshold_backward`, `aten.max_pool2d_with_indices` and its backward), in
the same process, alternating per row.
Figures are milliseconds of thread CPU time (time spent descheduled on a loaded machine does
not count): the minimum and the median of `--calls` calls after three warm-up calls.

Run from the repository root: `OMP_NUM_THREADS=1 python benchmarks/lenet_kernels.py`.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np


def _time(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    """(minimum, median) milliseconds of thread time per call."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.thread_time()
        fn()
        times.append(time.thread_time() - t0)
    return min(times) * 1e3, statistics.median(times) * 1e3


def rows() -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    """(name, fusegrad call, torch call) for each kernel of a LeNet-5 training step."""
    import torch

    from fusegrad.ops import conv, pooling, unary

    rng = np.random.default_rng(0)

    def arr(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    t = torch.from_numpy
    aten = torch.ops.aten
    x1, w1, b1, g1 = arr(64, 1, 32, 32), arr(6, 1, 5, 5), arr(6), arr(64, 6, 28, 28)
    x2, w2, b2, g2 = arr(64, 6, 14, 14), arr(16, 6, 5, 5), arr(16), arr(64, 16, 10, 10)
    one, zero = [1, 1], [0, 0]
    out = [
        ("conv1 forward", lambda: conv._conv_kernel(x1, w1, b1, one, zero, one, False, zero, 1),
         lambda: aten.convolution(t(x1), t(w1), t(b1), one, zero, one, False, zero, 1)),
        ("conv1 backward (w, b)",
         lambda: conv._conv_backward_arrays(g1, x1, w1, False, True, True, one, zero, one, 1),
         lambda: aten.convolution_backward(t(g1), t(x1), t(w1), [6], one, zero, one, False,
                                           zero, 1, [False, True, True])),
        ("conv2 forward", lambda: conv._conv_kernel(x2, w2, b2, one, zero, one, False, zero, 1),
         lambda: aten.convolution(t(x2), t(w2), t(b2), one, zero, one, False, zero, 1)),
        ("conv2 backward (x, w, b)",
         lambda: conv._conv_backward_arrays(g2, x2, w2, True, True, True, one, zero, one, 1),
         lambda: aten.convolution_backward(t(g2), t(x2), t(w2), [16], one, zero, one, False,
                                           zero, 1, [True, True, True])),
    ]
    for i, y in ((1, g1), (2, g2)):
        act = unary._relu_kernel(y)
        gy = arr(*y.shape)
        out.append((f"relu {i} forward", lambda y=y: unary._relu_kernel(y),
                    lambda y=y: aten.relu(t(y))))
        out.append((f"relu {i} backward", lambda gy=gy, act=act: unary._relu_grad_array(gy, act),
                    lambda gy=gy, act=act: aten.threshold_backward(t(gy), t(act), 0)))
    k = [2, 2]
    for i, x in ((1, g1), (2, g2)):
        vals, idx = pooling._maxpool_kernel(x, k, k, zero, one, False)
        gv = arr(*vals.shape)
        tidx = aten.max_pool2d_with_indices(t(x), k, k, zero, one, False)[1]
        out.append((f"max pool {i} forward",
                    lambda x=x: pooling._maxpool_kernel(x, k, k, zero, one, False),
                    lambda x=x: aten.max_pool2d_with_indices(t(x), k, k, zero, one, False)))
        out.append((f"max pool {i} backward",
                    lambda x=x, gv=gv, idx=idx: pooling._maxpool_backward_np(gv, idx, x.shape,
                                                                             True),
                    lambda x=x, gv=gv, tidx=tidx: aten.max_pool2d_with_indices_backward(
                        t(gv), t(x), k, k, zero, one, False, tidx)))
    return out


def main() -> None:
    """Print one line per kernel and the sums of the minima."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    total_f = total_t = 0.0
    print(f"{'kernel':26s} {'fusegrad min/median':>20s} {'torch min/median':>18s}  ratio")
    for name, fg, th in rows():
        f, t = _time(fg, args.calls), _time(th, args.calls)
        total_f += f[0]
        total_t += t[0]
        print(f"{name:26s} {f[0]:9.3f} / {f[1]:7.3f} {t[0]:8.3f} / {t[1]:7.3f}  {f[0] / t[0]:5.2f}")
    print(f"{'sum of minima':26s} {total_f:9.3f} {'':9s} {total_t:8.3f} {'':9s}  "
          f"{total_f / total_t:5.2f}")


if __name__ == "__main__":
    main()
