"""Capture keeps eager's semantics where user programs found it did not: a plain
`set_grad_enabled(mode)` call switches grad mode at once (and keeps it after the call), an
input's own class answers `isinstance`, NumPy's scalar results come back as themselves, and a
NumPy function on an array that a tensor mutated in the graph shares is not evaluated early."""

import numpy as np
import pytest

import fusegrad

BACKENDS = ["eager", "aot_eager", "inductor"]


def _grad_mode_programs():
    def plain(x):
        fusegrad.set_grad_enabled(False)
        return (x * 2,)

    def restored(x):
        prev = fusegrad.is_grad_enabled()
        fusegrad.set_grad_enabled(False)
        y = x * 2
        fusegrad.set_grad_enabled(prev)
        return y, y * x

    def block(x):
        with fusegrad.set_grad_enabled(False):
            y = x * 2
        return y, x * 3

    def inside_no_grad(x):
        with fusegrad.no_grad():
            fusegrad.autograd.set_grad_enabled(True)
            y = x * 2
        return y, x * 4

    return [plain, restored, block, inside_no_grad]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", range(4))
def test_set_grad_enabled_called_switches_the_mode_as_eager(backend, index):
    f = _grad_mode_programs()[index]
    seen = []
    for fn in (f, fusegrad.compile(f, backend=backend)):
        fusegrad.set_grad_enabled(True)
        try:
            out = fn(fusegrad.ones(2, requires_grad=True))
            seen.append(([t.requires_grad for t in out], fusegrad.is_grad_enabled(),
                         [t.tolist() for t in out]))
        finally:
            fusegrad.set_grad_enabled(True)
    assert seen[1] == seen[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_isinstance_sees_an_inputs_own_class(backend):
    def f(x):
        return isinstance(x, fusegrad.nn.Parameter), isinstance(x, fusegrad.Tensor)

    compiled = fusegrad.compile(f, backend=backend)
    for x in (fusegrad.nn.Parameter(fusegrad.ones(2)), fusegrad.ones(2)):
        assert compiled(x) == f(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalar_results_come_back_as_themselves(backend):
    def f(a, b):
        return np.dot(a, b), np.matmul(a, b)

    a, b = np.array([1.0, -2.0]), np.array([3.0, 4.0])
    ours = fusegrad.compile(f, backend=backend)(a, b)
    assert ours == f(a, b) and [type(v) for v in ours] == [type(v) for v in f(a, b)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_reads_an_array_after_the_graph_mutated_its_tensor(backend):
    def through_numpy(x):
        a = x.numpy()
        x.add_(1)
        return float(np.sum(a)), float(np.max(a))

    def through_from_numpy(x, a):
        t = fusegrad.from_numpy(a)
        t.mul_(2)
        return float(np.sum(a)), x + 1

    assert fusegrad.compile(through_numpy, backend=backend)(fusegrad.ones(3)) == \
        through_numpy(fusegrad.ones(3))
    a, b = np.ones(3, np.float32), np.ones(3, np.float32)
    ours = fusegrad.compile(through_from_numpy, backend=backend)(fusegrad.ones(1), a)
    theirs = through_from_numpy(fusegrad.ones(1), b)
    assert ours[0] == theirs[0] and np.array_equal(a, b)
