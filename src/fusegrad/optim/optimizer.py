"""`Optimizer`: parameter groups, per-parameter state, zero_grad and state_dict.

Updates work on the parameters' arrays in place (bumping their version counters), outside
autograd, as PyTorch's optimizers run under no_grad.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import _thread_state
from .._tensor import Tensor
from ..ops import _parallel

# Elements per block of a blocked update (`Optimizer._blocked`): a few float32 blocks (a
# parameter, its gradient, its state, a work block) stay in a core's L2 cache between passes.
BLOCK = 1 << 18
# Parameters of fewer elements take an optimizer's plain whole-array passes.
BLOCKED_MIN = 1 << 16


class _RequiredParameter:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _RequiredParameter()


def _new_state(like: np.ndarray) -> Tensor:
    return Tensor._make(np.zeros_like(like))


def _profiled(kind: str, fn: Callable) -> Callable:
    """`fn` (an optimizer's step or zero_grad) as one `Optimizer.step#SGD.step` block in a
    running profile, as PyTorch labels it; without a profiler, one count check."""
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        if _thread_state.active.modes:
            from ..profiler import record_function

            with record_function(f"Optimizer.{kind}#{type(self).__name__}.{kind}"):
                return fn(self, *args, **kwargs)
        return fn(self, *args, **kwargs)

    method._profiled = True
    return method


class Optimizer:
    """Base class: holds `param_groups` (dicts with 'params' and options) and `state`."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        for kind in ("step", "zero_grad"):
            fn = cls.__dict__.get(kind)
            if fn is not None and not getattr(fn, "_profiled", False):
                setattr(cls, kind, _profiled(kind, fn))

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            # Named by its tensor type (torch.FloatTensor), a Parameter's too, as PyTorch does.
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.type()}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self) -> str:
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    def __getstate__(self) -> dict:
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered "
                            "collections, but the ordering of tensors in sets will change "
                            "between runs. Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                # Named as `typename` names it (a builtin without its module), as PyTorch does.
                from .._functions.compat_more import typename

                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                f"is {typename(p)}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len({id(p) for p in param_group["params"]}) != len(param_group["params"]):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (to None by default)."""
        from ..nn.utils.grads import zero_grads

        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable | None = None):
        """One optimization step (subclasses implement `_update`)."""
        loss = None
        if closure is not None:
            from ..autograd import enable_grad

            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._check_group(group)
            # A group that keeps no state gets a throwaway dict, so `self.state` (and
            # state_dict) has no empty entry PyTorch would not have.
            keeps = self._keeps_state(group)
            for p in group["params"]:
                if p.grad is not None:
                    state = self.state[p] if keeps else {}
                    self._update(p, p.grad._data, group, state)
                    p._vc[0] += 1
        return loss

    def _keeps_state(self, group: dict) -> bool:
        """Whether the update keeps per-parameter state under `group`'s options."""
        return True

    def _check_group(self, group: dict) -> None:
        """Run, before any state changes, the first arithmetic the update does with the
        group's hyperparameters, so a bad one (a string learning rate) raises Python's own
        TypeError, as in PyTorch, with the parameters and their state untouched."""

    def _update(self, p: Tensor, grad: np.ndarray, group: dict, state: dict) -> None:
        raise NotImplementedError

    def _blocked(self, like: np.ndarray, update: Callable) -> None:
        """Call `update(i, j, tmp)` for the flat element ranges [i, j) of `like`'s size, one
        cache-sized block after another (an update's passes over a block run while it is in
        cache, instead of each pass over the whole parameter through memory), the blocks
        shared between intra-op threads; `tmp` is a work array of j - i elements, the
        block's own. Elementwise passes give each element the whole-array operations in
        their order: the same bits at every block size and thread count."""
        n = like.size
        # At most `BLOCK`, and a block per thread for a parameter of fewer blocks.
        size = min(BLOCK, -(-n // _parallel.num_threads()))
        work = self._scratch(like).reshape(-1)

        def blocks(first: int, last: int) -> None:
            # This chunk's block-sized part of the work buffer, reused for each of its blocks.
            tmp = work[first * size:first * size + size]
            for i in range(first * size, min(last * size, n), size):
                j = min(i + size, n)
                update(i, j, tmp[:j - i])

        _parallel.for_chunks(blocks, -(-n // size), n)

    def _scratch(self, like: np.ndarray) -> np.ndarray:
        """A work array shaped as `like`: a view of one flat buffer shared by all parameters
        (as large as the largest), kept outside `state` so state_dict does not see it."""
        flat = self.__dict__.get("_scratch_buf")
        if flat is None or flat.dtype != like.dtype or flat.size < like.size:
            flat = np.empty(like.size, dtype=like.dtype)
            self.__dict__["_scratch_buf"] = flat
        return flat[:like.size].reshape(like.shape)

    def state_dict(self) -> dict:
        """{'state': {index: {...}}, 'param_groups': [{options, 'params': [indices]}]}."""
        index = {}
        groups = []
        start = 0
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = list(range(start, start + len(g["params"])))
            for i, p in zip(ids, g["params"]):
                index.setdefault(id(p), i)
            packed["params"] = ids
            start += len(ids)
            groups.append(packed)
        state = {index[id(p)]: v for p, v in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore options and state saved by `state_dict` (copies the tensors)."""
        state_dict = copy.deepcopy(state_dict)
        groups = self.param_groups
        saved = state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {}
        for g, s in zip(groups, saved):
            for old, p in zip(s["params"], g["params"]):
                id_map[old] = p
        self.state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k not in id_map:
                continue
            p = id_map[k]
            self.state[p] = {name: self._cast_state(p, name, val) for name, val in v.items()}
        for g, s in zip(groups, saved):
            for k, v in s.items():
                if k != "params":
                    g[k] = v

    @staticmethod
    def _cast_state(p: Tensor, name: str, value):
        if isinstance(value, Tensor) and name != "step" and value.is_floating_point():
            return value.to(p.dtype) if value.dtype is not p.dtype else value
        return value


Optimizer.step = _profiled("step", Optimizer.step)
Optimizer.zero_grad = _profiled("zero_grad", Optimizer.zero_grad)
