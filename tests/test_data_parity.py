"""DataLoader worker seeding, persistent workers and StopIteration, against torch."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import fusegrad  # noqa: E402
from fusegrad.utils.data import _worker  # noqa: E402

LIBS = {"fusegrad": fusegrad, "torch": torch}


class NumpyDraw:
    """Each item is a draw from NumPy's global RNG (as seeded in the worker)."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return np.random.randint(0, 10 ** 6)


class StopAt5:
    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 5:
            raise StopIteration
        return i


def _lists(batches):
    return [b.tolist() if hasattr(b, "tolist") else b for b in batches]


def test_numpy_seed_words_match_torch():
    from torch.utils.data._utils.worker import _generate_state

    for base, wid in [(0, 0), (1, 3), (2 ** 63 - 1, 7), (123456789012345, 1)]:
        assert _worker._numpy_seed(base, wid) == _generate_state(base, wid)


def _numpy_epochs(lib, persistent):
    L = LIBS[lib]
    L.manual_seed(0)
    dl = L.utils.data.DataLoader(NumpyDraw(), batch_size=2, num_workers=2,
                                 persistent_workers=persistent)
    epochs = [_lists(dl) for _ in range(2)]
    return epochs, L.rand(2).tolist()


def test_worker_numpy_draws_and_persistent_workers_as_torch():
    for persistent in (False, True):
        assert _numpy_epochs("fusegrad", persistent) == _numpy_epochs("torch", persistent)


def _stop_iteration(lib):
    L = LIBS[lib]
    out = []
    for nw, bs in [(0, 2), (2, 2), (2, None)]:
        it = iter(L.utils.data.DataLoader(StopAt5(), batch_size=bs, num_workers=nw))
        out.append(_lists(it))
        # The rest of the pass, to its end, which stops the workers now: an iterator whose
        # pass stopped at the dataset's StopIteration is kept alive by that exception's
        # traceback (a reference cycle), and torch's, left to the cyclic collector, finds
        # its queues already closed and waits out its workers' join timeout (5 s each).
        out.append(_lists(it))
    it = iter(L.utils.data.DataLoader(StopAt5(), batch_size=2, num_workers=2))
    out.append(_lists(it))
    out.append(next(it).tolist())  # the pass goes on after the error, as in torch
    out.append(_lists(it))
    return out


def test_stop_iteration_in_getitem_ends_the_loop_as_torch():
    assert _stop_iteration("fusegrad") == _stop_iteration("torch")
