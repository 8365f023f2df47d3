"""The `fusegrad` command: `fusegrad demo` runs the autograd walk-through."""

from __future__ import annotations

import argparse
import sys

DEMO = '''\
import fusegrad as torch

# Leaves
X1 = torch.tensor(2.0, requires_grad=True)
X2 = torch.tensor(3.0, requires_grad=True)

a = X1 * X2                  # a = X1 * X2
y1 = torch.log(a)            # y1 = log(a)
y2 = torch.sin(X2)           # y2 = sin(X2)
w = y1 * y2                  # w = y1 * y2
z = w

for t in (a, y1, y2, w, z):
    t.retain_grad()

print("Forward: z =", z.item())
z.backward()
print(f"dz/dz  = {z.grad.item()}")
print(f"dz/dw  = {w.grad.item()}")
print(f"dz/dy1 = {w.grad.item()} * y2 = {y1.grad.item()}")
print(f"dz/dy2 = {w.grad.item()} * y1 = {y2.grad.item()}")
print(f"dz/da  = {y1.grad.item()} * (1/{a.item()}) = {a.grad.item()}")
print(f"dz/dX1 = {a.grad.item()} * X2 = {X1.grad.item()}")
print(f"dz/dX2 = {a.grad.item()} * X1 + {y2.grad.item()} * cos(X2) = {X2.grad.item()}")


def show_graph(fn, indent=0):
    if fn is None:
        return
    print("  " * indent, fn)
    for next_fn, _ in fn.next_functions:
        show_graph(next_fn, indent + 1)


print("The backward graph of z:")
show_graph(z.grad_fn)
'''


def demo() -> None:
    """Run the first seed's autograd example: values, gradients and the backward graph."""
    print(DEMO)
    print("-" * 72)
    exec(compile(DEMO, "<fusegrad demo>", "exec"), {"__name__": "__demo__"})


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `fusegrad` command."""
    parser = argparse.ArgumentParser(prog="fusegrad", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the autograd walk-through and print its graph")
    args = parser.parse_args(argv)
    if args.command == "demo":
        demo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
