"""`torch.fx.immutable_collections`: the list and dict types of a Node's arguments.

They are plain `list` and `dict` subclasses (so every reader treats them as such) whose
mutating methods raise, because a Node keeps its users up to date only when its arguments are
replaced as a whole (`node.args = new_args`); they hash by content, pickle, and are pytree
nodes. Copying gives plain containers, as slicing and `+` do.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..utils import _pytree
from ..utils._pytree_keys import mapping_flatten_with_keys, sequence_flatten_with_keys

__all__ = ["immutable_list", "immutable_dict"]

_HINT = ("If you are attempting to modify the kwargs or args of a torch.fx.Node object,\n"
         "instead create a new copy of it and assign the copy to the node:\n\n"
         "    new_args = ...  # copy and mutate args\n"
         "    node.args = new_args")


def _refuse(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
    raise TypeError(f"'{type(self).__name__}' object does not support mutation. {_HINT}")


class immutable_list(list):
    """A list that refuses to change, hashable by its items."""

    __delitem__ = __iadd__ = __imul__ = __setitem__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> tuple:
        return (type(self), (tuple(self),))


class immutable_dict(dict):
    """A dict that refuses to change, hashable by its items (in any order)."""

    __delitem__ = __ior__ = __setitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple:
        return (type(self), (tuple(self.items()),))


_pytree.register_pytree_node(
    immutable_list, lambda x: (list(x), None), lambda values, _: immutable_list(values),
    flatten_with_keys_fn=sequence_flatten_with_keys)
_pytree.register_pytree_node(
    immutable_dict, lambda d: (list(d.values()), list(d)),
    lambda values, keys: immutable_dict(zip(keys, values)),
    flatten_with_keys_fn=mapping_flatten_with_keys)
