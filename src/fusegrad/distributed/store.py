"""Key-value stores for the rendezvous of process groups, as `torch.distributed`'s.

`TCPStore` keeps its keys in a server thread of the master process; every store object
(the master's too) talks to it over one TCP connection with length-prefixed requests in a
small tagged encoding of plain values (never pickle: the port is open to the network, and
decoding must not run code), and the server answers each in turn, so a blocking
`get`/`wait` simply waits on the server for its key (with the store's timeout).
`FileStore` keeps the keys in a file locked with `fcntl` (for `file://` rendezvous), in the
same encoding; `HashStore` in this process's memory; `PrefixStore` puts a prefix in front of
another store's keys.

TCPStore and HashStore also hold queues (`queue_push`/`queue_pop`/`queue_len`), apart from the
keys as in PyTorch: a queue is not a key for `get`, `num_keys` or `delete_key`, but `check`
and `wait` see a non-empty one (and TCPStore's `get` too). FileStore has none, as PyTorch's.
"""

from __future__ import annotations

import collections
import datetime
import functools
import os
import socket
import struct
import sys
import threading
import time
import types

try:
    import fcntl
except ImportError:  # (not POSIX: the package still imports; a FileStore cannot be made)
    fcntl = None

from .process_group import DistNetworkError, DistStoreError, QueueEmptyError

_DEFAULT_TIMEOUT = datetime.timedelta(seconds=300)
# The key counting the store objects that joined (the master's wait_for_workers reads it);
# user keys get a leading "/" so that it never collides with them (as in PyTorch).
_INIT_KEY = "init/"
_LEN = struct.Struct("<Q")
_FLOAT = struct.Struct("<d")


def _seconds(timeout) -> float:
    return timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)


class _BadArgument(TypeError):
    """An argument of a type the store method does not take (`_checked` words the error)."""


def _value(value) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise _BadArgument(f"incompatible function arguments: a store value is str or bytes, got "
                       f"{type(value).__name__}")


def _key(key) -> str:
    if not isinstance(key, str):
        raise _BadArgument(f"incompatible function arguments: a store key is str, got "
                           f"{type(key).__name__}")
    return key


# The parameters PyTorch's store methods list when called with an argument of a wrong type.
_INT = "typing.SupportsInt | typing.SupportsIndex"
_KEYS = "collections.abc.Sequence[str]"
_SIGNATURES = {
    "set": ["arg0: str, arg1: str) -> None"],
    "get": ["arg0: str) -> bytes"],
    "add": [f"arg0: str, arg1: {_INT}) -> int"],
    "compare_set": ["arg0: str, arg1: str, arg2: str) -> bytes"],
    "append": ["arg0: str, arg1: str) -> None"],
    "check": [f"arg0: {_KEYS}) -> bool"],
    "multi_get": [f"arg0: {_KEYS}) -> list[bytes]"],
    "multi_set": [f"arg0: {_KEYS}, arg1: {_KEYS}) -> None"],
    "wait": [f"arg0: {_KEYS}) -> None", f"arg0: {_KEYS}, arg1: datetime.timedelta) -> None"],
    "delete_key": ["arg0: str) -> bool"],
    "queue_push": ["arg0: str, arg1: str) -> None"],
    "queue_pop": ["key: str, block: bool = True) -> bytes"],
    "queue_len": ["arg0: str) -> int"],
    "barrier": [f"key: str, world_size: {_INT}, timeout: datetime.timedelta | None = None) "
                f"-> None"],
}


def _checked(name: str, method):
    """`method` with PyTorch's error for an argument of a wrong type."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except _BadArgument:
            pass
        forms = "\n".join(f"    {i}. (self: fusegrad._C._distributed_c10d.Store, {sig}"
                          for i, sig in enumerate(_SIGNATURES[name], 1))
        invoked = ", ".join([repr(self), *map(repr, args),
                             *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise TypeError(f"{name}(): incompatible function arguments. The following argument "
                        f"types are supported:\n{forms}\n\nInvoked with: {invoked}")
    return call


def _check_arguments(cls) -> None:
    for name in _SIGNATURES:
        if name in cls.__dict__:
            setattr(cls, name, _checked(name, cls.__dict__[name]))


class _Timeout(Exception):
    """Keys that did not appear in time; each store words it as PyTorch's does."""

    def __init__(self, keys: list[str], seconds: float) -> None:
        super().__init__(keys, seconds)
        self.keys = keys
        self.ms = int(round(seconds * 1000))


class _BarrierTimeout(_Timeout):
    """A TCPStore barrier whose count did not reach the world size in time."""


class _QueueEmpty(Exception):
    """A non-blocking pop of an empty queue."""


def _tcp_timeout(t: _Timeout) -> DistStoreError:
    if isinstance(t, _BarrierTimeout):
        return DistStoreError(f"barrier timeout after {t.ms}ms, key: {t.keys[0][1:]}")
    return DistStoreError(f"wait timeout after {t.ms}ms, keys: {', '.join(t.keys)}")


_NO_QUEUES = "queue support is not implemented."
_QUEUE_OPS = ("qpush", "qpop", "qlen")  # (the queue operations of `_op`)


class Store:
    """Base class of the key-value stores (PyTorch's `torch.distributed.Store`)."""

    def __init__(self) -> None:
        self._timeout = _DEFAULT_TIMEOUT

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        _check_arguments(cls)

    @property
    def timeout(self) -> datetime.timedelta:
        """How long `get` and `wait` wait for a key."""
        return self._timeout

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        """Change the timeout of `get` and `wait`."""
        self._timeout = timeout

    # The operations every store implements on its raw (already prefixed) keys.
    def _op(self, name: str, *args):
        if name in _QUEUE_OPS:
            raise NotImplementedError(_NO_QUEUES)
        raise NotImplementedError("the base Store holds no keys")

    def set(self, key: str, value) -> None:
        """Set `key` to `value` (str or bytes)."""
        self._op("set", "/" + _key(key), _value(value))

    def get(self, key: str) -> bytes:
        """The value of `key`, waiting up to the timeout for it to be set."""
        return self._op("get", "/" + _key(key), _seconds(self._timeout))

    def add(self, key: str, amount: int) -> int:
        """Add `amount` to the integer at `key` (0 when unset); returns the new value."""
        return self._op("add", "/" + _key(key), int(amount))

    def compare_set(self, key: str, expected_value, desired_value) -> bytes:
        """Set `key` to `desired_value` if it holds `expected_value` (or is unset and
        `expected_value` is empty); returns the value it holds afterwards."""
        return self._op("cas", "/" + _key(key), _value(expected_value), _value(desired_value))

    def append(self, key: str, value) -> None:
        """Append `value` to the bytes at `key` (set it when unset)."""
        self._op("append", "/" + _key(key), _value(value))

    def multi_get(self, keys: list[str]) -> list[bytes]:
        """The values of `keys`, waiting for each."""
        return [self.get(k) for k in keys]

    def multi_set(self, keys: list[str], values: list) -> None:
        """Set every key of `keys` to the value at the same place in `values`."""
        for k, v in zip(keys, values):
            self.set(k, v)

    def check(self, keys: list[str]) -> bool:
        """Whether every key of `keys` is set (without waiting)."""
        return self._op("check", ["/" + _key(k) for k in keys])

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        """Wait until every key of `keys` is set; DistStoreError after the timeout."""
        limit = self._timeout if timeout is None else timeout
        self._op("wait", ["/" + _key(k) for k in keys], _seconds(limit))

    def delete_key(self, key: str) -> bool:
        """Remove `key`; whether it was set."""
        return self._op("delete", "/" + _key(key))

    def num_keys(self) -> int:
        """Number of keys the store holds (its own bookkeeping keys included)."""
        return self._op("num")

    def list_keys(self) -> list[str]:
        """The keys set through the store's API."""
        return [k[1:] for k in self._op("list") if k.startswith("/")]

    def has_extended_api(self) -> bool:
        """Whether the store has the extended operations (PyTorch's stores that do say so)."""
        return False

    def queue_push(self, key: str, value) -> None:
        """Append `value` to the queue `key` (waking one waiting `queue_pop`)."""
        self._op("qpush", "/" + _key(key), _value(value))

    def queue_pop(self, key: str, block: bool = True) -> bytes:
        """Take the oldest value of the queue `key`: waiting up to the timeout for one, or
        QueueEmptyError at once when `block` is False and the queue is empty."""
        return self._op("qpop", "/" + _key(key), bool(block), _seconds(self.timeout))

    def queue_len(self, key: str) -> int:
        """Number of values in the queue `key`."""
        return self._op("qlen", "/" + _key(key))

    def barrier(self, key: str, world_size: int,
                timeout: datetime.timedelta | None = None) -> None:
        """Block until `world_size` callers (this one included) have reached the barrier
        `key`; the error of a `wait` after `timeout` (the store's when None)."""
        # The caller that completes the count marks the barrier passed; every other waits
        # for that mark (later callers find it set and pass at once).
        if self.add(f"{_key(key)}/num_members", 1) == int(world_size):
            self.set(f"{key}/last_member", "1")
            return
        self.wait([f"{key}/last_member"], self._barrier_timeout() if timeout is None
                  else timeout)

    def _barrier_timeout(self) -> datetime.timedelta:
        return self.timeout

    def clone(self) -> Store:
        """A store object on the same keys, for use from another thread."""
        raise RuntimeError('Tried to call pure virtual function "::c10d::Store::clone"')


_check_arguments(Store)


class _Table:
    """The keys of a store and the operations on them, guarded by one condition variable."""

    def __init__(self, get_sees_queues: bool = False) -> None:
        self.data: dict[str, bytes] = {}
        self.queues: dict[str, collections.deque] = {}
        self.cond = threading.Condition()
        # `wait` returns for a non-empty queue; TCPStore's `get` does too (reading b""), but
        # HashStore's waits for the key itself.
        self.get_sees_queues = get_sees_queues

    def apply(self, name: str, *args):
        if name not in _OPERATIONS:  # (a request from the network names only these)
            raise DistNetworkError(f"an unknown store request {name!r}")
        with self.cond:
            return getattr(self, "_" + name)(*args)

    def _set(self, key, value):
        self.data[key] = value
        self.cond.notify_all()

    def _get(self, key, seconds):
        if self.get_sees_queues:
            self._wait([key], seconds)
            # (a key that is only a queue reads as empty, as in PyTorch's TCPStore)
            return self.data.get(key, b"")
        self._until(lambda: key in self.data, [key], seconds)
        return self.data[key]

    def _add(self, key, amount):
        try:
            value = int(self.data.get(key, b"0")) + amount
        except ValueError:
            # (PyTorch's stores parse the value with C++'s stoll, and name it)
            raise ValueError("stoll") from None
        self.data[key] = str(value).encode()
        self.cond.notify_all()
        return value

    def _cas(self, key, expected, desired):
        current = self.data.get(key)
        if current is None:
            if expected:
                return expected
            self._set(key, desired)
            return desired
        if current == expected:
            self._set(key, desired)
            return desired
        return current

    def _append(self, key, value):
        self._set(key, self.data.get(key, b"") + value)

    def _check(self, keys):
        return all(k in self.data or self.queues.get(k) for k in keys)

    def _until(self, ready, keys, seconds, error=_Timeout):
        """Wait (on the condition) until `ready()`; `error(keys, seconds)` after `seconds`."""
        deadline = time.monotonic() + seconds
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0:
                raise error(keys, seconds)
            self.cond.wait(left)

    def _wait(self, keys, seconds):
        self._until(lambda: self._check(keys), keys, seconds)

    def _barrier(self, key, world_size, seconds):
        # TCPStore's barrier: one counter at `key`, passed once it reaches `world_size`.
        self._add(key, 1)
        self._until(lambda: int(self.data[key]) >= world_size, [key], seconds,
                    _BarrierTimeout)

    def _qpush(self, key, value):
        self.queues.setdefault(key, collections.deque()).append(value)
        self.cond.notify_all()

    def _qpop(self, key, block, seconds):
        if not block and not self.queues.get(key):
            raise _QueueEmpty()
        self._until(lambda: bool(self.queues.get(key)), [key], seconds)
        return self.queues[key].popleft()

    def _qlen(self, key):
        return len(self.queues.get(key, ()))

    def _mset(self, keys, values):
        for k, v in zip(keys, values):
            self.data[k] = v
        self.cond.notify_all()

    def _delete(self, key):
        return self.data.pop(key, None) is not None

    def _num(self):
        return len(self.data)

    def _list(self):
        return list(self.data)


# The table operations a client may request (the server calls `_Table._<name>`).
_OPERATIONS = frozenset(["set", "get", "add", "cas", "append", "check", "wait", "delete",
                         "num", "list", "barrier", "qpush", "qpop", "qlen", "mset"])


def _encode(obj, out: bytearray) -> None:
    """Append plain value `obj` (None, bool, int, float, str, bytes, or a list or tuple of
    those) to `out`, each value a one-byte tag and its bytes."""
    if obj is None or obj is True or obj is False:
        out += {None: b"N", True: b"T", False: b"F"}[obj]
    elif type(obj) is int:
        text = str(obj).encode()
        out += b"I" + _LEN.pack(len(text)) + text
    elif type(obj) is float:
        out += b"D" + _FLOAT.pack(obj)
    elif type(obj) in (str, bytes, bytearray):
        data = obj.encode() if type(obj) is str else bytes(obj)
        out += (b"S" if type(obj) is str else b"B") + _LEN.pack(len(data)) + data
    elif type(obj) in (list, tuple):
        out += (b"L" if type(obj) is list else b"U") + _LEN.pack(len(obj))
        for item in obj:
            _encode(item, out)
    else:
        raise TypeError(f"a store message cannot hold a {type(obj).__name__}")


def _decode(data: bytes, at: int = 0):
    """(value, next position) of the value `_encode` wrote at `at`."""
    tag = data[at:at + 1]
    at += 1
    if tag in (b"N", b"T", b"F"):
        return {b"N": None, b"T": True, b"F": False}[tag], at
    if tag == b"D":
        return _FLOAT.unpack_from(data, at)[0], at + _FLOAT.size
    (n,) = _LEN.unpack_from(data, at)
    at += _LEN.size
    if tag in (b"I", b"S", b"B"):
        raw = data[at:at + n]
        value = int(raw) if tag == b"I" else raw.decode() if tag == b"S" else bytes(raw)
        return value, at + n
    if tag in (b"L", b"U"):
        items = []
        for _ in range(n):
            item, at = _decode(data, at)
            items.append(item)
        return (items if tag == b"L" else tuple(items)), at
    raise DistNetworkError("a malformed store message")


def _bytes_of(data: dict) -> bytes:
    """A key table as a `FileStore` file holds it (the store's encoding, not pickle: the
    file may be written by others)."""
    out = bytearray()
    _encode([[k, v] for k, v in data.items()], out)
    return bytes(out)


def _table_of(raw: bytes) -> dict:
    """The key table a `FileStore` file holds (empty for an empty file)."""
    if not raw:
        return {}
    try:
        pairs, _ = _decode(raw)
        return {k: v for k, v in pairs}
    except (DistNetworkError, ValueError, TypeError, struct.error, IndexError):
        raise DistStoreError("the store file holds no key table") from None


def _send_msg(sock: socket.socket, obj) -> None:
    payload = bytearray()
    _encode(obj, payload)
    sock.sendall(_LEN.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise DistNetworkError("Failed to recv, got 0 bytes. Connection was likely closed. "
                                   "Did the remote server shutdown or crash?")
        got += k
    return bytes(buf)


def _recv_msg(sock: socket.socket):
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    value, _ = _decode(_recv_exact(sock, n))
    return value


class _Server:
    """The master's key table, served to every client connection by a thread of its own."""

    def __init__(self, host: str, port: int) -> None:
        self.table = _Table(get_sees_queues=True)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError as exc:
            sock.close()
            raise DistNetworkError(
                f"The server socket has failed to listen on any local network address. "
                f"port: {port}, useIpv6: false, code: -{exc.errno}, name: "
                f"{_errno_name(exc.errno)}, message: {_errno_text(exc)}") from None
        sock.listen(128)
        self.sock = sock
        self.port = sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True, name="fusegrad-store").start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="fusegrad-store-client").start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    request = _recv_msg(conn)
                except (DistNetworkError, OSError, ValueError, struct.error, IndexError):
                    return  # (a closed or malformed connection)
                try:
                    reply = ("ok", self.table.apply(*request))
                except _Timeout as exc:
                    reply = ("error", str(_tcp_timeout(exc)))
                except _QueueEmpty:
                    reply = ("empty", "queue is empty")
                except (DistNetworkError, TypeError, KeyError, ValueError):
                    return  # (a request no store client sends)
                try:
                    _send_msg(conn, reply)
                except OSError:
                    return

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _errno_name(code: int | None) -> str:
    import errno

    return errno.errorcode.get(code or 0, "UNKNOWN")


def _errno_text(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def _connect(host: str, port: int, seconds: float) -> socket.socket:
    """A connection to (host, port), retried until `seconds` have passed."""
    deadline = time.monotonic() + seconds
    delay = 0.01
    while True:
        try:
            sock = socket.create_connection((host, port),
                                            timeout=max(0.05, deadline - time.monotonic()))
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return sock
        except OSError:
            if time.monotonic() + delay > deadline:
                raise DistNetworkError(
                    f"The client socket has timed out after {int(round(seconds * 1000))}ms "
                    f"while trying to connect to ({host}, {port}).") from None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class TCPStore(Store):
    """A store served over TCP by the master process (`is_master=True`) to the others.

    With `world_size` given the master waits (with `wait_for_workers`) until that many store
    objects have connected."""

    def __init__(self, host_name: str, port: int, world_size: int | None = None,
                 is_master: bool = False, timeout: datetime.timedelta = _DEFAULT_TIMEOUT,
                 wait_for_workers: bool = True, multi_tenant: bool = False,
                 master_listen_fd=None, use_libuv: bool = True) -> None:
        super().__init__()
        if world_size is not None and int(world_size) == 0:
            raise ValueError("TCPStore world size cannot be 0")
        self._timeout = timeout
        self._host = host_name
        self._server = _Server(host_name, int(port)) if is_master else None
        self._port = self._server.port if is_master else int(port)
        self._lock = threading.Lock()
        self._sock = _connect("127.0.0.1" if is_master else host_name, self._port,
                              _seconds(timeout))
        self.libuvBackend = bool(use_libuv)  # noqa: N815 - PyTorch's attribute name
        if world_size is not None and (not is_master or wait_for_workers):
            self._op("add", _INIT_KEY, 1)
        if is_master and world_size is not None and wait_for_workers:
            self._wait_for_workers(int(world_size), _seconds(timeout))

    def _wait_for_workers(self, world_size: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            joined = self._server.table.apply("add", _INIT_KEY, 0)
            if joined >= world_size:
                return
            if time.monotonic() > deadline:
                raise DistStoreError(f"Timed out after {int(seconds) + 1} seconds waiting for "
                                     f"clients. {joined}/{world_size} clients joined.")
            with self._server.table.cond:
                self._server.table.cond.wait(0.05)

    @property
    def host(self) -> str:
        """The master's host name, as given."""
        return self._host

    @property
    def port(self) -> int:
        """The port the master listens on."""
        return self._port

    def _op(self, name: str, *args):
        with self._lock:
            try:
                _send_msg(self._sock, (name, *args))
                status, value = _recv_msg(self._sock)
            except BrokenPipeError:
                raise DistNetworkError("Broken pipe") from None
            except ConnectionResetError:
                raise DistNetworkError("Connection reset by peer") from None
        if status == "error":
            raise DistStoreError(value)
        if status == "empty":
            raise QueueEmptyError(value)
        return value

    def has_extended_api(self) -> bool:
        """True, as PyTorch's TCPStore."""
        return True

    def barrier(self, key: str, world_size: int,
                timeout: datetime.timedelta | None = None) -> None:
        """Block until `world_size` callers have reached the barrier `key` (one counter kept
        by the server, as PyTorch's TCPStore does it)."""
        limit = self._timeout if timeout is None else timeout
        self._op("barrier", "/" + _key(key), int(world_size), _seconds(limit))

    def multi_set(self, keys: list[str], values: list) -> None:
        """Set every key of `keys` to the value at the same place in `values`, at once."""
        if len(keys) != len(values):
            raise DistStoreError("multiSet keys and values vectors must be of same size")
        self._op("mset", ["/" + _key(k) for k in keys], [_value(v) for v in values])

    def clone(self) -> TCPStore:
        """Another client of the same server, with this store's timeout (its own connection,
        so that each thread may block on a store of its own)."""
        other = TCPStore.__new__(TCPStore)
        Store.__init__(other)
        other._timeout = self._timeout
        other._host = self._host
        other._port = self._port
        other._server = None
        other._lock = threading.Lock()
        peer = self._sock.getpeername()
        other._sock = _connect(peer[0], peer[1], _seconds(self._timeout))
        other.libuvBackend = self.libuvBackend
        return other

    def _local_address(self) -> str:
        """This process's address on the connection to the master (how peers reach it)."""
        return self._sock.getsockname()[0]

    def _close(self) -> None:
        try:
            self._sock.close()
        finally:
            if getattr(self, "_server", None) is not None:
                self._server.close()

    def __del__(self) -> None:
        # As PyTorch's: a master store that goes away stops serving.
        if hasattr(self, "_sock"):
            self._close()

    def __repr__(self) -> str:
        return f"TCPStore(host={self._host}, port={self._port})"


class HashStore(Store):
    """A store in this process's memory (threads of one process share it)."""

    def __init__(self) -> None:
        super().__init__()
        self._table = _Table()

    def _op(self, name: str, *args):
        try:
            return self._table.apply(name, *args)
        except _Timeout:
            raise DistStoreError("Wait timeout") from None
        except _QueueEmpty:
            raise QueueEmptyError("queue is empty") from None

    def has_extended_api(self) -> bool:
        """True, as PyTorch's HashStore."""
        return True

    def clone(self) -> HashStore:
        """This store itself: its table is already safe to use from any thread (PyTorch's
        HashStore gives itself too)."""
        return self


class FileStore(Store):
    """A store kept in the file `file_name`, shared by the processes that open it.

    As PyTorch's: every store object on the file counts itself in (the `refcount/` key) and
    out again when it is closed or collected; the file is removed when the last one goes and
    at least `world_size` have gone (never for `world_size` -1). So one path may serve
    successive process groups: a group made on it before the previous one's last store has
    gone keeps the file, and its keys with it."""

    _CLEANUP_KEY = "cleanup/"
    _REFCOUNT_KEY = "refcount/"

    def __init__(self, file_name: str, world_size: int = -1) -> None:
        super().__init__()
        self.path = file_name
        self._world_size = int(world_size)
        self._closed = True
        self._op("add", self._REFCOUNT_KEY, 1)
        self._closed = False

    def _apply(self, fn, remove_if=None):
        """`fn(table)` on the file's keys under its lock, the file rewritten when they
        changed; the file is then removed (still locked) when `remove_if(result)`."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            with os.fdopen(fd, "r+b") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                try:
                    # The last store of another process may have removed the file between
                    # the open and the lock: this one then works on a fresh file.
                    try:
                        same = os.stat(self.path).st_ino == os.fstat(f.fileno()).st_ino
                    except FileNotFoundError:
                        same = False
                    if not same:
                        continue
                    table = _Table()
                    table.data = _table_of(f.read())
                    before = dict(table.data)
                    with table.cond:
                        result = fn(table)
                    if remove_if is not None and remove_if(result):
                        os.unlink(self.path)
                    elif table.data != before:
                        f.seek(0)
                        f.truncate()
                        f.write(_bytes_of(table.data))
                        f.flush()
                    return result
                finally:
                    fcntl.flock(f, fcntl.LOCK_UN)

    def _op(self, name: str, *args):
        if name in _QUEUE_OPS:
            return super()._op(name, *args)  # (no queues in a file, as PyTorch's)
        if name in ("get", "wait"):
            keys = [args[0]] if name == "get" else args[0]
            seconds = args[1]
            deadline = time.monotonic() + seconds
            pause = 1e-3
            while not self._apply(lambda t: all(k in t.data for k in keys)):
                if time.monotonic() > deadline:
                    if name == "wait":
                        raise RuntimeError("Wait timeout")
                    raise RuntimeError(f"Timeout waiting for key: {keys[0][1:]} after "
                                       f"{int(round(seconds * 1000))} ms")
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
            if name == "wait":
                return None
            return self._apply(lambda t: t.data[keys[0]])
        if name == "delete":   # PyTorch's FileStore says True whether or not it was there
            self._apply(lambda t: t._delete(*args))
            return True
        return self._apply(lambda t: getattr(t, "_" + name)(*args))

    def list_keys(self) -> list[str]:
        """Every key of the file without its first character (PyTorch's FileStore lists its
        own bookkeeping keys so too)."""
        return [k[1:] for k in self._op("list")]

    def clone(self) -> FileStore:
        """A new store object on the same file (with the default timeout, as PyTorch's)."""
        return FileStore(self.path, self._world_size)

    def _close(self) -> None:
        """Count this store out; the last one, once `world_size` have gone, removes the
        file."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        if not os.path.exists(self.path):
            return
        world_size = self._world_size

        def count_out(table):
            finished = table._add(self._CLEANUP_KEY, 1)
            return table._add(self._REFCOUNT_KEY, -1) == 0 and 0 <= world_size <= finished

        try:
            self._apply(count_out, remove_if=bool)
        except (OSError, DistStoreError):
            pass

    def __del__(self) -> None:
        # As PyTorch's: a store that goes away counts itself out of the file.
        try:
            self._close()
        except Exception:  # noqa: BLE001 - (at interpreter exit anything may be gone)
            pass


class PrefixStore(Store):
    """`store` with `prefix + "/"` in front of every key."""

    def __init__(self, prefix: str, store: Store) -> None:
        super().__init__()
        self.underlying_store = store
        self._prefix = prefix + "/"

    @property
    def timeout(self) -> datetime.timedelta:
        """The underlying store's timeout."""
        return self.underlying_store.timeout

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        """Change the underlying store's timeout."""
        self.underlying_store.set_timeout(timeout)

    def _op(self, name: str, *args):
        inner = self.underlying_store
        if name in ("num", "list"):
            return inner._op(name)
        if name == "get":
            return inner._op(name, "/" + self._prefix + args[0][1:], *args[1:])
        if name in ("check", "wait"):
            return inner._op(name, ["/" + self._prefix + k[1:] for k in args[0]], *args[1:])
        return inner._op(name, "/" + self._prefix + args[0][1:], *args[1:])

    def get(self, key: str) -> bytes:
        """The value of `key`, waiting up to the underlying store's timeout."""
        return self._op("get", "/" + _key(key), _seconds(self.timeout))

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        """Wait until every key of `keys` is set."""
        limit = self.timeout if timeout is None else timeout
        self._op("wait", ["/" + _key(k) for k in keys], _seconds(limit))

    def list_keys(self) -> list[str]:
        """The underlying store's keys that start with the prefix, without it (PyTorch
        matches the prefix without its "/" but cuts it with it)."""
        cut = len(self._prefix)
        return [k[cut:] for k in self.underlying_store.list_keys()
                if k.startswith(self._prefix[:-1])]

    def multi_set(self, keys: list[str], values: list) -> None:
        """The underlying store's `multi_set` on the prefixed keys."""
        self.underlying_store.multi_set([self._prefix + _key(k) for k in keys], values)

    def has_extended_api(self) -> bool:
        """Whether the underlying store has the extended operations."""
        return self.underlying_store.has_extended_api()

    def clone(self) -> PrefixStore:
        """The same prefix on a clone of the underlying store."""
        return PrefixStore(self._prefix[:-1], self.underlying_store.clone())

    def _barrier_timeout(self) -> datetime.timedelta:
        # PyTorch's PrefixStore passes `set_timeout` on to the underlying store but waits in a
        # barrier without a timeout for its own, which stays at the default.
        return self._timeout

    @property
    def _underlying_non_prefix_store(self) -> Store:
        """The first store below this one that is not a PrefixStore."""
        store = self.underlying_store
        while isinstance(store, PrefixStore):
            store = store.underlying_store
        return store


# PyTorch defines the concrete stores in its C extension module; fusegrad gives them a module
# object registered under the mapped name, so that PyTorch's paths find them.
_C_MODULE = "fusegrad._C._distributed_c10d"
_c10d = sys.modules.get(_C_MODULE)
if _c10d is None:
    _c10d = types.ModuleType(_C_MODULE, "fusegrad's stand-in for torch._C._distributed_c10d")
    sys.modules[_C_MODULE] = _c10d
for _cls in (TCPStore, HashStore, FileStore):
    _cls.__module__ = _C_MODULE
    setattr(_c10d, _cls.__name__, _cls)
del _cls
