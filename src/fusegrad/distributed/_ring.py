"""Ring all-reduce of large arrays: reduce-scatter then all-gather, pipelined by chunks.

For large messages Open MPI's non-blocking all-reduce on two ranks is a binomial tree: one rank
receives the whole array, reduces it and sends it all back, while the other waits. The ring
splits the array into one segment per rank; in `size - 1` steps every rank sends a segment to
its right neighbour and adds the one from its left into its own array (reduce-scatter), so that
each rank ends with one fully reduced segment, and in `size - 1` more steps the reduced
segments travel around the ring (all-gather). Every rank moves and adds `1/size` of the
array per step, all at once.

Each segment is further cut into chunks, and chunk `j` of every segment makes its own small
ring: its steps depend only on its own messages, so the adds of one chunk overlap the transfer
of the others, and a received chunk is added while it is still in the cache. At most `WINDOW`
chunk rings are in flight, each with a scratch buffer of one chunk.

Every reduced segment is computed on one rank and copied to the others, so all ranks get the
same bits. Messages travel on a communicator of their own, with one tag per chunk ring.
"""

from __future__ import annotations

import numpy as np

# Arrays from this many bytes on take the ring (below it MPI's all-reduce is faster).
MIN_BYTES = 1 << 20
CHUNK_BYTES = 1 << 20
WINDOW = 8
# Tags name (call, chunk): calls get consecutive numbers, so that the messages of two
# all-reduces in flight at once never match each other's receives. The numbers wrap around
# at MPI's largest tag (Open MPI's ob1 allows 2^31 - 1: half a million calls).
_CHUNKS_PER_CALL = 1 << 12


def usable(flat: np.ndarray, size: int, ufunc) -> bool:
    """Whether the ring should reduce `flat` over `size` ranks with `ufunc`."""
    return ufunc is not None and size > 1 and flat.nbytes >= MIN_BYTES


class _ChunkRing:
    """Chunk `j` of every segment: its `2 * (size - 1)` steps and their two requests."""

    __slots__ = ("j", "step", "send", "recv", "scratch")

    def __init__(self, j: int, scratch: np.ndarray) -> None:
        self.j = j
        self.step = 0
        self.send = None
        self.recv = None
        self.scratch = scratch


class RingAllreduce:
    """An all-reduce of `flat` (contiguous, 1-D) with `ufunc` over the ring of `comm`.

    `test()` moves it along without blocking and says whether it has finished."""

    def __init__(self, comm, flat: np.ndarray, ufunc, call: int) -> None:
        from mpi4py import MPI

        self._test_pair = MPI.Request.Testall
        self.comm = comm
        self.flat = flat
        self.ufunc = ufunc
        size, rank = comm.Get_size(), comm.Get_rank()
        self.size, self.rank = size, rank
        self.right, self.left = (rank + 1) % size, (rank - 1) % size
        n = flat.size
        seg = [i * n // size for i in range(size + 1)]
        longest = max(seg[i + 1] - seg[i] for i in range(size))
        chunks = -(-longest * flat.itemsize // CHUNK_BYTES)
        chunks = max(1, min(chunks, _CHUNKS_PER_CALL))
        # Chunk j of segment i is flat[bounds[i][j]:bounds[i][j + 1]].
        self.bounds = [[seg[i] + j * (seg[i + 1] - seg[i]) // chunks for j in range(chunks + 1)]
                       for i in range(size)]
        self.chunks = chunks
        calls = max(1, (comm.Get_attr(MPI.TAG_UB) + 1) // _CHUNKS_PER_CALL)
        self.tag0 = (call % calls) * _CHUNKS_PER_CALL
        width = max(self.bounds[i][j + 1] - self.bounds[i][j]
                    for i in range(size) for j in range(chunks))
        window = min(WINDOW, chunks)
        self.scratch = np.empty(window * width, dtype=flat.dtype)
        self.active = [_ChunkRing(j, self.scratch[j * width:(j + 1) * width])
                       for j in range(window)]
        self.next_chunk = window
        for ring in self.active:
            self._post(ring)

    def _piece(self, segment: int, j: int) -> np.ndarray:
        b = self.bounds[segment % self.size]
        return self.flat[b[j]:b[j + 1]]

    def _post(self, ring: _ChunkRing) -> None:
        """Start the transfers of `ring`'s current step."""
        s, last = ring.step, self.size - 1
        if s < last:    # reduce-scatter: pass a partial sum on, receive one to add to
            out = self._piece(self.rank - s, ring.j)
            into = ring.scratch[:self._piece(self.rank - s - 1, ring.j).size]
        else:           # all-gather: pass a reduced piece on, receive one in place
            s -= last
            out = self._piece(self.rank + 1 - s, ring.j)
            into = self._piece(self.rank - s, ring.j)
        tag = self.tag0 + ring.j
        ring.recv = self.comm.Irecv(into, source=self.left, tag=tag)
        ring.send = self.comm.Isend(out, dest=self.right, tag=tag)

    def _advance(self, ring: _ChunkRing) -> bool:
        """After `ring`'s step completed: add what came in, start the next step.

        False once the ring has made all its steps."""
        last = self.size - 1
        if ring.step < last:
            piece = self._piece(self.rank - ring.step - 1, ring.j)
            self.ufunc(piece, ring.scratch[:piece.size], out=piece)
        ring.step += 1
        if ring.step == 2 * last:
            return False
        self._post(ring)
        return True

    def test(self) -> bool:
        """Progress every chunk ring whose step has completed; True when all are done."""
        still = []
        for ring in self.active:
            while self._test_pair([ring.send, ring.recv]):
                if self._advance(ring):
                    continue
                if self.next_chunk < self.chunks:   # the scratch goes to the next chunk
                    ring.j, ring.step = self.next_chunk, 0
                    self.next_chunk += 1
                    self._post(ring)
                    continue
                ring = None
                break
            if ring is not None:
                still.append(ring)
        self.active = still
        return not still
