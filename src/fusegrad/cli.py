"""The `fusegrad` command.

`fusegrad demo` trains a small CNN (or, with `--model mlp`, an MLP) on the 1,797 real 8x8
handwritten digits of `fusegrad.datasets.digits()`, printing one line per epoch with the
training time and the train and test accuracy. `fusegrad demo --ddp N` trains the same way on
N processes with DistributedDataParallel (each rank a share of every batch; rank 0 prints).
`fusegrad demo --autograd` runs the first seed's autograd walk-through instead (values,
gradients and the backward graph). `fusegrad demo --compile` trains the model compiled with
`fusegrad.compile` (generated C kernels), printing `Compile Time` (the first compiled
training step less a compiled step after it) and its epochs, then trains it again eagerly
from the same seed for the epochs beside them.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

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


def autograd_demo() -> None:
    """Run the first seed's autograd example: values, gradients and the backward graph."""
    print(DEMO)
    print("-" * 72)
    exec(compile(DEMO, "<fusegrad demo>", "exec"), {"__name__": "__demo__"})


def build_model(kind: str):
    """The demo's network for 1x8x8 digit images: `"cnn"` (default) or `"mlp"`."""
    from . import nn

    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),   # 16 x 8 x 8
            nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),  # 32 x 8 x 8
            nn.ReLU(),
            nn.MaxPool2d(2),                              # 32 x 4 x 4
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )
    if kind == "mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(64, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        )
    raise ValueError(f"unknown model {kind!r}; expected 'cnn' or 'mlp'")


def _accuracy(model, loader) -> float:
    """Percentage of the samples of `loader` that `model` classifies correctly."""
    from .autograd.grad_mode import no_grad

    correct = total = 0
    model.eval()
    with no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(1) == y).sum().item())
            total += int(y.shape[0])
    return 100.0 * correct / max(total, 1)


def train_demo(epochs: int = 10, batch_size: int = 32, model_kind: str = "cnn", seed: int = 0,
               lr: float = 3e-3, progress: bool = True, distributed: bool = False,
               compile: bool = False) -> float:  # noqa: A002  (the command's option name)
    """Train on the digits (80/20 split fixed by `seed`); print one line per epoch.

    Adam with a cosine-annealed learning rate and cross-entropy loss; `Train ACC` is measured
    on the batches as they are trained, `Test ACC` on the held-out 20% after each epoch.
    With `distributed` (in a process started by the launcher) the model is wrapped in
    DistributedDataParallel, each rank trains on its DistributedSampler share of every epoch
    (`batch_size` per rank) and only rank 0 prints. With `compile` the model runs through
    `fusegrad.compile` (the default backend: generated C kernels) and `Compile Time` is
    printed after the first batch: that step's time less the second step's.

    Returns the final test accuracy in percent.
    """
    from tqdm import tqdm

    import fusegrad as torch
    from fusegrad import nn, optim
    from fusegrad.utils.data import DataLoader, random_split

    torch.manual_seed(seed)
    dataset = torch.datasets.digits()
    train_set, test_set = random_split(dataset, [0.8, 0.2],
                                       generator=torch.Generator().manual_seed(seed))
    sampler = None
    if distributed:
        from fusegrad import distributed as dist
        from fusegrad.utils.data.distributed import DistributedSampler

        dist.init_process_group("gloo")
        sampler = DistributedSampler(train_set, seed=seed + 1)
        progress = progress and dist.get_rank() == 0
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=sampler is None,
                              sampler=sampler, generator=torch.Generator().manual_seed(seed + 1))
    test_loader = DataLoader(test_set, batch_size=256)
    model = build_model(model_kind)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    trained = model
    if compile:
        model = torch.compile(model)
    # In a distributed run only rank 0 reports.
    say = print if sampler is None or dist.get_rank() == 0 else (lambda *a, **k: None)
    optimizer = optim.Adam(trained.parameters(), lr=lr)
    # The learning rate decays to 0 along a cosine over the run, which steadies the last epochs.
    scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(epochs, 1))
    loss_fn = nn.CrossEntropyLoss()
    say(f"digits: {len(train_set)} train / {len(test_set)} test, model={model_kind}, "
          f"epochs={epochs}, batch_size={batch_size}, lr={lr}, seed={seed}")
    test_acc = 0.0
    step_times: list = []
    run_start = time.perf_counter()
    for epoch in range(epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        model.train()
        correct = seen = batches = 0
        start = time.perf_counter()
        bar = tqdm(train_loader, desc=f"Epoch {epoch:02d}", leave=False, disable=not progress,
                   file=sys.stderr)
        for x, y in bar:
            step_start = time.perf_counter()
            optimizer.zero_grad()
            logits = model(x)
            loss = loss_fn(logits, y)
            loss.backward()
            optimizer.step()
            correct += int((logits.argmax(1) == y).sum().item())
            seen += int(y.shape[0])
            batches += 1
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            if compile and epoch == 0 and batches <= 2:
                # The first step captures and generates code; the second runs it.
                step_times.append(time.perf_counter() - step_start)
                if batches == 2:
                    say(f"Compile Time: {max(step_times[0] - step_times[1], 0.0):.2f}s",
                        flush=True)
        bar.close()
        scheduler.step()
        train_time = time.perf_counter() - start
        if sampler is not None:
            counts = torch.tensor([correct, seen])
            dist.all_reduce(counts)       # accuracy over every rank's share of the epoch
            correct, seen = counts.tolist()
        train_acc = 100.0 * correct / max(seen, 1)
        test_acc = _accuracy(model, test_loader)
        say(f"Epoch {epoch:02d} | Train Time: {train_time:.2f}s | "
              f"Batch Time: {train_time / max(batches, 1):.4f}s | "
              f"Train ACC: {train_acc:.2f}% | Test ACC: {test_acc:.2f}%", flush=True)
    say(f"Done: {epochs} epochs in {time.perf_counter() - run_start:.2f}s | "
        f"Final Test ACC: {test_acc:.2f}%")
    if sampler is not None:
        dist.destroy_process_group()
    return test_acc


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `fusegrad` command."""
    parser = argparse.ArgumentParser(prog="fusegrad", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train a small CNN on the 8x8 digits "
                          "(--autograd: the autograd walk-through)")
    demo.add_argument("--autograd", action="store_true",
                      help="run the autograd walk-through and print its backward graph")
    demo.add_argument("--epochs", type=int, default=10, help="training epochs (default 10)")
    demo.add_argument("--batch-size", type=int, default=32, help="batch size (default 32)")
    demo.add_argument("--model", choices=("cnn", "mlp"), default="cnn",
                      help="network to train (default cnn)")
    demo.add_argument("--seed", type=int, default=0,
                      help="seed of the split, the shuffling and the weights (default 0)")
    demo.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default 3e-3)")
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    demo.add_argument("--compile", action="store_true",
                      help="train compiled (fusegrad.compile), print Compile Time, then "
                           "train eagerly from the same seed for comparison")
    demo.add_argument("--ddp", type=int, default=0, metavar="N",
                      help="train on N processes with DistributedDataParallel (needs the "
                           "distributed extra); --batch-size is then per process")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.autograd:
            autograd_demo()
        elif args.ddp and "LOCAL_RANK" not in os.environ:
            # Start N ranks of this same command through the launcher; each lands below.
            from .distributed.run import main as launch

            return launch(["--nproc-per-node", str(args.ddp), "-m", "fusegrad", *argv])
        else:
            runs = (("# compiled (fusegrad.compile)", True), ("# eager", False)) \
                if args.compile else ((None, False),)
            for title, compiled in runs:
                if title:
                    print(title, flush=True)
                train_demo(epochs=args.epochs, batch_size=args.batch_size,
                           model_kind=args.model, seed=args.seed, lr=args.lr,
                           progress=not args.no_progress, distributed=bool(args.ddp),
                           compile=compiled)
    return 0


if __name__ == "__main__":
    sys.exit(main())
