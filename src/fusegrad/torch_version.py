"""`TorchVersion`: a version string that compares as a version, the class of
`fusegrad.__version__` as of PyTorch's `torch.__version__`.

Which version fusegrad reports: programs written for PyTorch pick code paths by comparing
`torch.__version__` (`>= "1.10"`, `>= (2, 0)`, `< "2.1"`), and under `import fusegrad as
torch` they must take the paths for the PyTorch whose behaviour fusegrad reproduces, not for
a PyTorch 0.1. So `__version__` is that PyTorch's version with fusegrad's own release as the
local label, "2.13.0+fusegrad0.1.0", as PyTorch's builds label theirs ("2.13.0+cpu"): it
compares as 2.13.0, and its local part names the package. The package's own version (its
metadata's, `importlib.metadata.version("fusegrad")`) is `fusegrad.version.fusegrad`; it
must stay equal to pyproject.toml's `version` (a test checks).
"""

from __future__ import annotations

import re

_PATTERN = None  # PEP 440's version syntax, compiled on the first comparison
_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_INF = float("inf")


def _pattern():
    global _PATTERN
    if _PATTERN is None:
        _PATTERN = re.compile(
            r"\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)"
            r"(?:[-_.]?(?P<pre>alpha|beta|preview|pre|rc|a|b|c)[-_.]?(?P<pre_n>\d+)?)?"
            r"(?:-(?P<post_n1>\d+)|[-_.]?(?P<post>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?"
            r"(?:[-_.]?(?P<dev>dev)[-_.]?(?P<dev_n>\d+)?)?"
            r"(?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*", re.IGNORECASE)
    return _PATTERN


def _key(text: str) -> tuple | None:
    """The PEP 440 sort key of version `text`, or None when it is no version."""
    m = _pattern().fullmatch(text)
    if m is None:
        return None
    release = [int(p) for p in m["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:  # 2.0 == 2.0.0
        release.pop()
    post = m["post_n1"] or m["post_n2"]
    has_post = m["post_n1"] is not None or m["post"] is not None
    dev = None if m["dev"] is None else int(m["dev_n"] or 0)
    if m["pre"] is not None:
        pre = (_PRE[m["pre"].lower()], int(m["pre_n"] or 0))
    elif not has_post and dev is not None:
        pre = (-_INF, 0)  # 2.0.dev1 comes before 2.0a1
    else:
        pre = (_INF, 0)
    local = () if m["local"] is None else tuple(
        (int(s), "") if s.isdigit() else (-_INF, s.lower())
        for s in re.split(r"[-_.]", m["local"]))
    return (int(m["epoch"] or 0), tuple(release), pre,
            int(post or 0) if has_post else -_INF, _INF if dev is None else dev,
            (0,) + local if local else (-1,))


def _other_key(other) -> tuple | None:
    """The key of what a version is compared with: a version string, or a sequence of
    numbers (`(2, 0)`) read as the version they spell; None for anything else."""
    if isinstance(other, str):
        return _key(other)
    try:
        parts = iter(other)
    except TypeError:
        return None
    return _key(".".join(str(p) for p in parts))


def _comparison(name: str):
    str_method = getattr(str, name)

    def method(self, other):
        mine, theirs = _key(self), _other_key(other)
        if mine is None or theirs is None:  # not versions: as strings, as PyTorch falls back
            return str_method(self, other)
        return getattr(mine, name)(theirs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"`{name}` as versions (PEP 440), or as strings for non-versions."
    return method


class TorchVersion(str):
    """A version string that compares as a version with another version string or a tuple
    of numbers (`v >= "1.10"`, `v >= (2, 0)`), as PyTorch's `TorchVersion` does."""

    __slots__ = ()
    __gt__ = _comparison("__gt__")
    __lt__ = _comparison("__lt__")
    __ge__ = _comparison("__ge__")
    __le__ = _comparison("__le__")
    __eq__ = _comparison("__eq__")
    __hash__ = str.__hash__  # as a string (defining __eq__ would otherwise drop it)
