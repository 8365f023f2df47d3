"""Rendezvous without MPI: `env://`, `tcp://host:port` and `file:///path` init methods, or a
store given to `init_process_group`, as PyTorch resolves them (with its error messages).

The result is the store the ranks meet in, this process's rank and the world size; the
connections are then made by `_tcp.connect`.
"""

from __future__ import annotations

import atexit
import os
import urllib.parse

from .store import FileStore, TCPStore

# Master stores by port: a process that initialises, destroys and initialises again on the
# same MASTER_PORT keeps serving the same store (so that a peer which comes back faster never
# meets a closed server), and every initialisation uses keys of its own.
_MASTER_STORES: dict = {}
_generation = [0]


def _error(scheme: str, what: str) -> ValueError:
    return ValueError(f"Error initializing torch.distributed using {scheme}:// rendezvous: "
                      f"{what}")


def _env(name: str) -> str:
    value = os.environ.get(name)
    if value is None:
        raise _error("env", f"environment variable {name} expected, but not set")
    return value


@atexit.register
def _close_master_stores() -> None:
    for store in _MASTER_STORES.values():
        store._close()
    _MASTER_STORES.clear()


def _tcp_store(host: str, port: int, rank: int, world_size: int, timeout) -> TCPStore:
    if rank == 0:
        store = _MASTER_STORES.get(port)
        if store is not None:
            return store
        store = TCPStore(host, port, world_size, True, timeout)
        _MASTER_STORES[port] = store
        return store
    return TCPStore(host, port, world_size, False, timeout)


def rendezvous(init_method: str | None, rank: int, world_size: int, timeout) -> tuple:
    """(store, rank, world_size, whether the store is ours to close) for `init_method`."""
    url = urllib.parse.urlparse(init_method or "env://")
    query = dict(urllib.parse.parse_qsl(url.query))
    if rank != -1:
        query["rank"] = str(rank)
    if world_size != -1:
        query["world_size"] = str(world_size)
    scheme = url.scheme
    if scheme == "env":
        rank = int(query["rank"]) if "rank" in query else int(_env("RANK"))
        world_size = (int(query["world_size"]) if "world_size" in query
                      else int(_env("WORLD_SIZE")))
        host = _env("MASTER_ADDR")
        port = int(_env("MASTER_PORT"))
        return _tcp_store(host, port, rank, world_size, timeout), rank, world_size, False
    if scheme == "tcp":
        if not url.port:
            raise _error("tcp", "port number missing")
        if "rank" not in query:
            raise _error("tcp", "rank parameter missing")
        if "world_size" not in query:
            raise _error("tcp", "world size parameter missing")
        rank, world_size = int(query["rank"]), int(query["world_size"])
        return (_tcp_store(url.hostname, url.port, rank, world_size, timeout), rank,
                world_size, False)
    if scheme == "file":
        path = url.path or url.netloc
        if not path:
            raise _error("file", "path missing")
        if "rank" not in query:
            raise _error("file", "rank parameter missing")
        if "world_size" not in query:
            raise _error("file", "world size parameter missing")
        rank, world_size = int(query["rank"]), int(query["world_size"])
        store = FileStore(path, world_size)
        store.set_timeout(timeout)
        return store, rank, world_size, True
    raise RuntimeError(f"No rendezvous handler for {scheme}://")


def next_prefix() -> str:
    """The key prefix of this process's next process group (the same on every rank, as every
    rank creates its groups in the same order)."""
    _generation[0] += 1
    return f"fusegrad_pg/{_generation[0]}/"
