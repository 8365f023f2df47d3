"""The first seed program must print what PyTorch prints (values to 6 significant digits and the
same tree of grad_fn nodes)."""

import torch
from oracle import fg, normalize_output, run_program

SEED = '''
import torch
X1 = torch.tensor(2.0, requires_grad=True)
X2 = torch.tensor(3.0, requires_grad=True)
a = X1 * X2
y1 = torch.log(a)
y2 = torch.sin(X2)
w = y1 * y2
z = w
a.retain_grad(); y1.retain_grad(); y2.retain_grad(); w.retain_grad(); z.retain_grad()
print("Forward: z =", z.item())
z.backward()
print(f"dz/dz -> {z.grad.item()}")
print(f"dz/dw = {w.grad.item()}")
print(f"dz/dy1 = {w.grad.item()} * {y2.item()} = {y1.grad.item()}")
print(f"dz/dy2 = {w.grad.item()} * {y1.item()} = {y2.grad.item()}")
print(f"dz/da  = {y1.grad.item()} * (1/{a.item()}) = {a.grad.item()}")
print(f"dz/dX1 = {a.grad.item()} * {X2.item()} = {X1.grad.item()}")
print(f"dz/dX2 = {a.grad.item()} * {X1.item()} + {y2.grad.item()} * {torch.cos(X2).item()} = {X2.grad.item()}")
def show_graph(fn, indent=0):
    if fn is None:
        return
    print("  " * indent, fn)
    for next_fn, _ in fn.next_functions:
        show_graph(next_fn, indent + 1)
show_graph(z.grad_fn)
'''  # noqa: E501


def test_seed_program_output_matches_torch():
    expected = normalize_output(run_program(SEED, torch)).splitlines()
    got = normalize_output(run_program(SEED, fg)).splitlines()
    # The oracle itself: 8 value lines, then MulBackward0 -> (LogBackward0 -> MulBackward0 ->
    # 2 leaves, SinBackward0 -> leaf).
    assert len(expected) == 8 + 7
    assert "MulBackward0" in expected[8] and "AccumulateGrad" in expected[-1]
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"line {i + 1}:\n  got      {g!r}\n  expected {e!r}"
    assert len(got) == len(expected), f"{len(got)} lines printed, expected {len(expected)}"


def test_seed_program_normalization_is_sensitive():
    # Guards the comparison: different values or node names must not normalize equal.
    assert normalize_output("z = 0.5") != normalize_output("z = 0.5001")
    assert normalize_output("<MulBackward0 object at 0x7f12>") == normalize_output(
        "<MulBackward0 object at 0xabc>"
    )
    assert normalize_output("<MulBackward0 object at 0x1>") != normalize_output(
        "<AddBackward0 object at 0x1>"
    )
    assert normalize_output("x 1.7917594909667969") == normalize_output("x 1.7917595")
