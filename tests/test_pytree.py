"""`fusegrad.utils._pytree` against `torch.utils._pytree`: leaves, specs (printing,
comparing, hashing), rebuilding, mapping, registration and the error messages."""

import collections
import warnings

import pytest
import torch
from torch.utils import _pytree as tp

import fusegrad
from fusegrad.utils import _pytree as fp

NT = collections.namedtuple("NT", "a b")


def _trees():
    return [
        5, None, "s", (), [], {},
        (1, [2, {"x": 3, "y": None}]),
        collections.OrderedDict(b=4, a=5),
        NT(6, [7, 8]),
        collections.defaultdict(list, {"k": 8, "j": (9,)}),
        collections.deque([9, 10], maxlen=3),
        collections.deque([1]),
        {"a": [1, (2,)], "b": {"c": NT(3, 4)}},
        [None, (None,), {"n": None}],
        ((((1,),),),),
    ]


def _run(module, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(module)
        except Exception as e:  # noqa: BLE001 - the error itself is compared
            return type(e), str(e)


@pytest.mark.parametrize("tree", _trees(), ids=repr)
def test_flatten_spec_and_rebuild(tree):
    leaves_t, spec_t = tp.tree_flatten(tree)
    leaves_f, spec_f = fp.tree_flatten(tree)
    assert leaves_f == leaves_t
    assert repr(spec_f) == repr(spec_t)
    assert str(spec_f) == str(spec_t)
    assert fp.treespec_pprint(spec_f) == tp.treespec_pprint(spec_t)
    for name in ("num_leaves", "num_nodes", "num_children", "context"):
        assert getattr(spec_f, name) == getattr(spec_t, name), name
    assert spec_f.is_leaf() == spec_t.is_leaf()
    rebuilt = fp.tree_unflatten(leaves_f, spec_f)
    assert type(rebuilt) is type(tree) and rebuilt == tree
    if isinstance(tree, collections.deque):
        assert rebuilt.maxlen == tree.maxlen
    if isinstance(tree, collections.defaultdict):
        assert rebuilt.default_factory is tree.default_factory
    assert fp.tree_leaves(tree) == tp.tree_leaves(tree)
    assert list(fp.tree_iter(tree)) == list(tp.tree_iter(tree))
    assert repr(fp.tree_structure(tree)) == repr(tp.tree_structure(tree))
    assert fp.tree_structure(tree) == fp.tree_structure(tree)
    assert hash(fp.tree_structure(tree)) == hash(spec_f)


def test_spec_types_and_children():
    spec_t, spec_f = tp.tree_structure(NT(1, 2)), fp.tree_structure(NT(1, 2))
    assert spec_f.type is collections.namedtuple is spec_t.type
    assert spec_f.context is NT
    spec_t = tp.tree_structure({"a": 1, "b": [2, 3]})
    spec_f = fp.tree_structure({"a": 1, "b": [2, 3]})
    assert spec_f.type is dict
    assert repr(spec_f.children()) == repr(spec_t.children())
    assert repr(spec_f.child(1)) == repr(spec_t.child(1))
    assert repr(fp.LeafSpec()) == repr(tp.LeafSpec()) == "*"
    assert fp.LeafSpec() == fp.tree_structure(5)
    built = fp.TreeSpec(list, None, [fp.LeafSpec(), fp.LeafSpec()])
    assert built == fp.tree_structure([1, 2]) and built != fp.tree_structure((1, 2))
    assert (fp.tree_structure((1, 2)) == 3) is False
    assert built.unflatten([5, 6]) == [5, 6]
    assert built.flatten_up_to([[5], 6]) == [[5], 6]


def test_return_types_print_as_torch():
    spec_t = tp.tree_structure(torch.max(torch.ones(2, 2), 0))
    spec_f = fp.tree_structure(fusegrad.max(fusegrad.ones(2, 2), 0))
    assert repr(spec_f) == repr(spec_t)
    leaves, spec = fp.tree_flatten(fusegrad.max(fusegrad.ones(2, 2), 0))
    assert type(fp.tree_unflatten(leaves, spec)) is fusegrad.return_types.max


@pytest.mark.parametrize("case", [
    lambda p: p.tree_unflatten([1, 2, 3], p.tree_structure((1, 2))),
    lambda p: p.tree_unflatten([1], p.tree_structure({"a": (1, 2)})),
    lambda p: p.tree_map(lambda a, b: a + b, (1, 2), (1, 2, 3)),
    lambda p: p.tree_map(lambda a, b: a + b, (1, 2), [1, 2]),
    lambda p: p.tree_map(lambda a, b: a + b, {"a": 1}, {"b": 1}),
    lambda p: p.tree_map(lambda a, b: a + b, {"a": 1, "c": 2}, {"b": 1, "a": 3}),
    lambda p: p.tree_map(lambda a, b: a + b, (1, (2, 3)), (1, 5)),
    lambda p: p.tree_map(lambda a, b: (a, b), (1, 5), (1, (2, 3))),
    lambda p: p.tree_map(lambda a, b: a + b, {"a": 1, "b": 2},
                         collections.OrderedDict(b=10, a=20)),
    lambda p: p.tree_map(lambda a, b: a + b, NT(1, 2), (1, 2)),
    lambda p: p.tree_map(lambda a, b: a + b, collections.deque([1, 2], maxlen=2),
                         collections.deque([3, 4])),
    lambda p: p.tree_map(lambda a, b, c: a + b * c, [1, 2], [3, 4], [5, 6]),
    lambda p: p.register_pytree_node(tuple, lambda x: (list(x), None), lambda v, c: tuple(v)),
    lambda p: p.tree_map_only(int, lambda x: x * 10, (1, 2.0, "a", [3], True)),
    lambda p: p.tree_map_only((int, str), lambda x: x * 2, (1, 2.0, "a", [3])),
    lambda p: p.tree_map_only(int | str, lambda x: x * 2, (1, 2.0, "a", [3])),
    lambda p: p.tree_map_only(lambda x: x == 2.0, lambda x: x * 2, (1, 2.0, "a", [3])),
    lambda p: p.tree_all(lambda x: x > 0, (1, [2, 3])),
    lambda p: p.tree_all(lambda x: x > 1, (1, [2, 3])),
    lambda p: p.tree_any(lambda x: x > 2, (1, [2, 3])),
    lambda p: p.tree_any(lambda x: x > 3, (1, [2, 3])),
    lambda p: p.tree_all_only(int, lambda x: x > 0, (1, "a", [2.5, -3.0])),
    lambda p: p.tree_any_only(float, lambda x: x < 0, (1, "a", [2.5, -3.0])),
    lambda p: p.tree_leaves([1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple)),
    lambda p: repr(p.tree_structure([1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple))),
    lambda p: p.tree_map(lambda x: -x, [1, (2, 3)], is_leaf=lambda x: x == (2, 3)),
    lambda p: p.tree_is_leaf((1, 2)),
    lambda p: p.tree_is_leaf(None),
    lambda p: p.tree_structure([1, 2]).flatten_up_to((5, 6)),
], ids=lambda c: str(c.__code__.co_firstlineno))
def test_behaviour_and_messages(case):
    assert _run(fp, case) == _run(tp, case)


def test_tree_map_inplace_returns_tree():
    seen_t, seen_f = [], []
    tree = {"a": [1, 2], "b": (3,)}
    assert tp.tree_map_(seen_t.append, tree) is tree
    assert fp.tree_map_(seen_f.append, tree) is tree
    assert seen_f == seen_t


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


def test_register_custom_node():
    for p in (tp, fp):
        p.register_pytree_node(Point, lambda pt: ([pt.x, pt.y], "ctx"),
                               lambda v, c: Point(*v))
    tree = [Point(1, (2, 3)), {"p": Point(4, 5)}]
    try:
        leaves_t, spec_t = tp.tree_flatten(tree)
        leaves_f, spec_f = fp.tree_flatten(tree)
        assert leaves_f == leaves_t == [1, 2, 3, 4, 5]
        assert repr(spec_f) == repr(spec_t)
        assert fp.tree_unflatten(leaves_f, spec_f) == tree
        assert fp.tree_map(lambda v: v * 2, tree) == tp.tree_map(lambda v: v * 2, tree)
        case = lambda p: p.tree_map(lambda a, b: a, [Point(1, 2)], [(1, 2)])  # noqa: E731
        assert _run(fp, case) == _run(tp, case)
    finally:
        tp._deregister_pytree_node(Point)
        del fp.SUPPORTED_NODES[Point]


def test_tensors_are_leaves_and_func_shares_the_module():
    x = fusegrad.ones(2)
    leaves, spec = fp.tree_flatten({"w": x, "b": [x, 3]})
    assert leaves[0] is x and leaves[1] is x and spec.num_leaves == 3
    from fusegrad.func import _vmap
    assert _vmap._pytree is fp
    assert fusegrad.utils._pytree is fp


def _paths(p, tree, **kw):
    """Key paths as (repr, keystr) pairs and the leaves they reach, for comparing."""
    pairs = p.tree_leaves_with_path(tree, **kw)
    return [(repr(k), p.keystr(k), p.key_get(tree, k) == v, v) for k, v in pairs]


@pytest.mark.parametrize("tree", _trees(), ids=repr)
def test_key_paths_name_every_leaf(tree):
    assert _paths(fp, tree) == _paths(tp, tree)
    pairs_t, spec_t = tp.tree_flatten_with_path(tree)
    pairs_f, spec_f = fp.tree_flatten_with_path(tree)
    assert repr(pairs_f) == repr(pairs_t) and repr(spec_f) == repr(spec_t)
    assert fp.tree_map_with_path(lambda k, v: fp.keystr(k), tree) == \
        tp.tree_map_with_path(lambda k, v: tp.keystr(k), tree)


def test_key_entries_behave_as_torch():
    for name in ("SequenceKey", "MappingKey", "GetAttrKey"):
        kt, kf = getattr(tp, name)(1), getattr(fp, name)(1)
        assert repr(kf) == repr(kt).replace("torch", "fusegrad") and str(kf) == str(kt)
        assert kf == getattr(fp, name)(1) and hash(kf) == hash(getattr(fp, name)(1))
    tree = {"m": torch.max(torch.ones(2, 2), 0), "t": [NT(1, (2,))]}
    tree_f = {"m": fusegrad.max(fusegrad.ones(2, 2), 0), "t": [NT(1, (2,))]}
    assert [repr(p) for p, _ in fp.tree_leaves_with_path(tree_f)] == \
        [repr(p) for p, _ in tp.tree_leaves_with_path(tree)]
    assert _paths(fp, [1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple)) == \
        _paths(tp, [1, (2, 3)], is_leaf=lambda x: isinstance(x, tuple))
    case = lambda p: p.tree_map_with_path(  # noqa: E731
        lambda k, a, b: (p.keystr(k), a + b), {"a": 1, "b": [2]}, {"a": 10, "b": [20]})
    assert _run(fp, case) == _run(tp, case)
    case = lambda p: p.tree_map_with_path(lambda k, a, b: a, (1, 2), (1, 2, 3))  # noqa: E731
    assert _run(fp, case) == _run(tp, case)


def test_key_paths_of_custom_nodes():
    for p in (tp, fp):
        p.register_pytree_node(Point, lambda pt: ([pt.x, pt.y], None),
                               lambda v, c: Point(*v),
                               flatten_with_keys_fn=lambda pt, p=p: (
                                   [(p.GetAttrKey("x"), pt.x), (p.GetAttrKey("y"), pt.y)],
                                   None))
    try:
        tree = {"p": [Point(1, (2, 3))]}
        assert _paths(fp, tree) == _paths(tp, tree)
    finally:
        tp._deregister_pytree_node(Point)
        del fp.SUPPORTED_NODES[Point]
    for p in (tp, fp):
        p.register_pytree_node(Point, lambda pt: ([pt.x, pt.y], None), lambda v, c: Point(*v))
    try:
        case = lambda p: p.tree_leaves_with_path([Point(1, 2)])  # noqa: E731
        got, want = _run(fp, case), _run(tp, case)
        assert got[0] is want[0] is ValueError
        assert got[1] == want[1].replace("torch", "fusegrad")
    finally:
        tp._deregister_pytree_node(Point)
        del fp.SUPPORTED_NODES[Point]
