import os
import sys
import tempfile

# Set before torch / numpy spin up their thread pools: keeps timings stable on small CI boxes.
os.environ["OMP_NUM_THREADS"] = "1"

import pytest  # noqa: E402


def _keep_bytecode_outside_the_tree() -> None:
    """Where the environment says not to write bytecode (PYTHONDONTWRITEBYTECODE) and names no
    place for it, keep it in a directory of the system's temporary one instead of nowhere: the
    suite's processes (xdist workers, the subprocesses and spawned ranks of the tests, which
    inherit the two variables) then load fusegrad's modules and pytest's rewritten test
    modules compiled, where each would compile them all again, and nothing is written beside
    the sources. Python checks each cached file against its source's size and time."""
    if not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "")
    prefix = os.path.join(tempfile.gettempdir(), f"fusegrad-test-pycache-{user}")
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


_keep_bytecode_outside_the_tree()


@pytest.fixture(autouse=True, scope="session")
def _codegen_cache(tmp_path_factory):
    """Compiled kernels go to a cache of this test run (shared by its xdist workers, which
    the cache's atomic writes allow), not the user's ~/.cache, unless FUSEGRAD_CACHE_DIR is
    set already."""
    if os.environ.get("FUSEGRAD_CACHE_DIR"):
        yield
        return
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory, above each worker's own
    path = base / "fusegrad-cache"
    path.mkdir(exist_ok=True)
    os.environ["FUSEGRAD_CACHE_DIR"] = str(path)
    yield
    os.environ.pop("FUSEGRAD_CACHE_DIR", None)


@pytest.fixture(autouse=True)
def _distribution_validation():
    """Each test starts with the distributions' argument validation on, the libraries'
    default, in torch and fusegrad alike: the first compile of a process switches it off
    for good (torch.compile does, and fusegrad.compile as it), which must not reach the
    tests that run after it in the same worker."""
    import sys

    modules = [sys.modules.get(name) for name in ("torch.distributions.distribution",
                                                  "fusegrad.distributions.distribution")]
    saved = [(m, m.Distribution._validate_args) for m in modules if m is not None]
    for m, _ in saved:
        m.Distribution.set_default_validate_args(True)
    yield
    for m, value in saved:
        m.Distribution.set_default_validate_args(value)


@pytest.fixture(scope="module")
def fresh_codegen_cache(tmp_path_factory):
    """A kernel cache of the test module's own, so that its tests compile their graphs
    instead of finding kernels another module built (`pytestmark`'s `usefixtures`)."""
    old = os.environ.get("FUSEGRAD_CACHE_DIR")
    os.environ["FUSEGRAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("fgcache"))
    yield
    if old is None:
        os.environ.pop("FUSEGRAD_CACHE_DIR", None)
    else:
        os.environ["FUSEGRAD_CACHE_DIR"] = old


@pytest.fixture
def threads():
    """Run a test at a given thread count, restoring the count afterwards."""
    import fusegrad

    before = fusegrad.get_num_threads()
    yield
    fusegrad.set_num_threads(before)


@pytest.fixture
def shared(threads, monkeypatch):
    """Share every piece of work the cost threshold would keep on the calling thread (tests'
    arrays are small), and work that ran faster whole before, so that the split paths run."""
    from fusegrad.ops import _parallel

    monkeypatch.setattr(_parallel, "MIN_PIECE_NS", 1)
    monkeypatch.setattr(_parallel, "_split_pays", lambda walls: True)


@pytest.fixture
def same_at_two_threads(shared, monkeypatch):
    """A check that `run()` (a list of arrays) gives one thread's bits at two threads, with
    even small arrays shared, and that work was shared."""
    import numpy as np
    from thread_support import run_shared

    import fusegrad
    from fusegrad.ops import _parallel

    monkeypatch.setattr(_parallel, "MIN_CHUNK", 1)
    monkeypatch.setattr(_parallel, "CHEAP_NS", 0)

    def check(run) -> None:
        fusegrad.set_num_threads(1)
        one = run()
        fusegrad.set_num_threads(2)
        two, shared = run_shared(run)
        assert shared  # the work was shared between threads (the pool or the C workers)
        for a, r in zip(one, two, strict=True):
            np.testing.assert_array_equal(a, r)

    return check


@pytest.fixture
def global_backward_hook_kind():
    """Each library remembers the kind of its global backward hooks for good (the first
    `register_module_full_backward_hook` or `register_module_backward_hook` sets it): put
    it back, so that a test registering one in a single library leaves both as later tests
    of the same worker compare them."""
    import torch.nn.modules.module as torch_module

    from fusegrad.nn.modules import _global_hooks

    before = (torch_module._global_is_full_backward_hook,
              _global_hooks._global_is_full_backward_hook)
    yield
    torch_module._global_is_full_backward_hook = before[0]
    _global_hooks._global_is_full_backward_hook = before[1]
