"""The two commonest views run and recorded in one frame: `x[i]` and `x.view(n)`.

Dispatch reaches these ops through `call`, the `TII`/`TN` recorder, the kernel, the op's
`save` and the saved-value loop: six Python frames for a view whose NumPy work is one index
or one reshape, so `x[i]` with grad cost about a quarter more than `x.exp()`. Here each is
one function with the op's facts written in: the kernel's common case, the result's slots
(a view: its base's version counter, its base, the version its history was made at), and
with grad the Node as the generated recorders build it (one edge, its leaf's accumulator
made in place, its input's shape and dtype, the saved values, which are a shape and numbers,
so never a version to keep). Both functions are generated from the recorders' template
(`_recorders.VIEW_CALLS`, checked in as `_recorded_calls.make_view_calls`), so the recording
path is still written once. Anything else (a mode, a tensor subclass, an index out of range,
a shape NumPy would refuse or copy for) goes through `call` as before, so errors and modes
are dispatch's. `tests/test_view_calls.py` checks every slot of the results and Nodes
against the general recorder's, in every grad state.

`select_first(a, index, data, shape)`: `a[index]` of a plain Tensor `a` whose array `data`
has `shape` (at least one dim) and an int `index` within dim 0 (the caller checked both).
`view_shape(a, shape)`: `a.view(shape)` of a plain Tensor `a` and a tuple of ints `shape`.
"""

from __future__ import annotations

from .._dispatch import call
from .._recorded_calls import make_view_calls
from .views import select, view

select_first, view_shape = make_view_calls(call, select, view)
