"""fusegrad.distributed's API without an MPI job: errors, signatures, sampler, launcher.

The sampler is compared with torch's DistributedSampler given the same permutation (the two
libraries' random streams differ), for 3 seeds and several dataset sizes and rank counts.
"""

import inspect
import math
import sys

import numpy as np
import pytest
import torch

import fusegrad
import fusegrad.distributed as fdist
from fusegrad.distributed._rank_env import rank_environment
from fusegrad.distributed.run import mpiexec_command, parse_args
from fusegrad.utils.data.distributed import DistributedSampler

NAMES = ["init_process_group", "all_reduce", "broadcast", "all_gather",
         "all_gather_into_tensor", "reduce_scatter_tensor", "gather", "scatter", "send", "recv",
         "isend", "irecv", "barrier", "new_group", "get_rank", "get_world_size", "reduce",
         "destroy_process_group", "is_initialized", "is_mpi_available", "get_backend"]


@pytest.mark.parametrize("name", NAMES)
def test_signatures_match_torch(name):
    ours = list(inspect.signature(getattr(fdist, name)).parameters)
    theirs = [p for p in inspect.signature(getattr(torch.distributed, name)).parameters
              if not p.startswith("_")]
    assert ours == theirs


def test_module_signatures_match_torch():
    for ours, theirs in ((fusegrad.nn.parallel.DistributedDataParallel,
                          torch.nn.parallel.DistributedDataParallel),
                         (fusegrad.nn.DataParallel, torch.nn.DataParallel),
                         (DistributedSampler, torch.utils.data.distributed.DistributedSampler)):
        assert (list(inspect.signature(ours.__init__).parameters)
                == list(inspect.signature(theirs.__init__).parameters))


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("call", [
    lambda d, m: d.get_rank(),
    lambda d, m: d.get_world_size(),
    lambda d, m: d.all_reduce(m.ones(2)),
    lambda d, m: d.barrier(),
    lambda d, m: m.utils.data.distributed.DistributedSampler(range(10)),
    lambda d, m: m.nn.parallel.DistributedDataParallel(m.nn.Linear(2, 2)),
])
def test_no_process_group_errors_as_torch(call):
    assert not fdist.is_initialized()
    expected = _error(lambda: call(torch.distributed, torch))
    assert expected[1].startswith("Default process group has not been initialized")
    assert _error(lambda: call(fdist, fusegrad)) == expected


def test_nccl_without_cuda_errors_as_torch(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29517")
    expected = _error(lambda: torch.distributed.init_process_group("nccl", rank=0,
                                                                   world_size=1))
    assert _error(lambda: fdist.init_process_group("nccl", rank=0, world_size=1)) == expected
    assert not fdist.is_initialized()


def test_missing_mpi4py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(ImportError, match=r"fusegrad\[distributed\]"):
        fdist.init_process_group("mpi")
    assert not fdist.is_initialized()


def test_reduce_op_as_torch():
    for name in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        ours, theirs = getattr(fdist.ReduceOp, name), getattr(torch.distributed.ReduceOp, name)
        assert repr(ours) == repr(theirs) and int(ours) == int(theirs)


def test_data_parallel_on_cpu_as_torch():
    torch.manual_seed(0)
    ref = torch.nn.Linear(3, 2)
    mine = fusegrad.nn.Linear(3, 2)
    mine.load_state_dict({k: fusegrad.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    dp, tdp = fusegrad.nn.DataParallel(mine), torch.nn.DataParallel(ref)
    assert dp.module is mine and dp.device_ids == tdp.device_ids == []
    assert list(dp.state_dict()) == list(tdp.state_dict())
    assert repr(dp) == repr(tdp)
    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(dp(fusegrad.tensor(x)).detach().numpy(),
                               tdp(torch.tensor(x)).detach().numpy(), rtol=1e-6)


def _torch_sampler_with(perm_of, monkeypatch, **kwargs):
    """torch's DistributedSampler, its permutation replaced by fusegrad's for the same seed."""
    def randperm(n, generator=None):
        return torch.tensor(perm_of(n, generator.initial_seed()))
    monkeypatch.setattr(torch, "randperm", randperm)
    return torch.utils.data.distributed.DistributedSampler(**kwargs)


def _fusegrad_perm(n, seed):
    return fusegrad.randperm(n, generator=fusegrad.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("seed", [0, 1, 1234])
@pytest.mark.parametrize("size, replicas", [(10, 3), (11, 4), (7, 2), (2, 5), (12, 3)])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("shuffle", [True, False])
def test_distributed_sampler_matches_torch(seed, size, replicas, drop_last, shuffle,
                                           monkeypatch):
    data = list(range(size))
    shares = []
    for rank in range(replicas):
        kw = dict(dataset=data, num_replicas=replicas, rank=rank, shuffle=shuffle, seed=seed,
                  drop_last=drop_last)
        ours = DistributedSampler(**kw)
        theirs = _torch_sampler_with(_fusegrad_perm, monkeypatch, **kw)
        for epoch in (0, 3):
            ours.set_epoch(epoch)
            theirs.set_epoch(epoch)
            assert list(ours) == list(theirs)
            assert len(ours) == len(theirs) == len(list(ours))
        shares.append(list(ours))
    # Properties: equal sizes, disjoint apart from padding, everything covered unless dropped.
    assert len({len(s) for s in shares}) == 1
    flat = [i for s in shares for i in s]
    if drop_last:
        assert len(flat) == len(set(flat)) == replicas * (size // replicas)
    else:
        assert set(flat) == set(data)
        assert len(flat) == replicas * math.ceil(size / replicas)


def test_distributed_sampler_bad_rank_as_torch():
    expected = _error(lambda: torch.utils.data.distributed.DistributedSampler(
        range(10), num_replicas=2, rank=5))
    assert _error(lambda: DistributedSampler(range(10), num_replicas=2, rank=5)) == expected


def test_launcher_command_and_rank_environment(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    cmd = mpiexec_command(3, ["train.py", "--lr", "1"], mpiexec="mpiexec")
    assert cmd[:3] == ["mpiexec", "-n", "3"] and "--oversubscribe" in cmd
    assert cmd[-4:] == ["fusegrad.distributed._rank_env", "train.py", "--lr", "1"]
    assert "--oversubscribe" not in mpiexec_command(2, ["t.py"], mpiexec="mpiexec")
    args = parse_args(["--nproc_per_node", "4", "train.py", "--epochs", "2"])
    assert args.nproc_per_node == 4 and args.training_script_args == ["--epochs", "2"]
    env = rank_environment({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                            "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == \
        ("1", "2", "1", "2")
    with pytest.raises(RuntimeError, match="must run under mpiexec"):
        rank_environment({})
