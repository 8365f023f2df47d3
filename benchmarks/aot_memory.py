"""Bytes the forward graph saves for the backward: default partition vs min-cut.

Two pointwise-heavy blocks (a GELU MLP, and a pre-LayerNorm residual block with a GELU MLP),
built with the same weights in fusegrad and torch, are compiled ahead of time with recording
compilers: fusegrad's `aot_module_simplified` with `default_partition` and with
`min_cut_rematerialization_partition`, and torch's `aot_module_simplified` with its
`min_cut_rematerialization_partition`. The figure is the sum of the sizes of the backward
graph's inputs other than the tangents (the saved values, parameters included). Each
fusegrad partition is also checked against eager: output and gradients.

Run: `python benchmarks/aot_memory.py` (needs torch and networkx; a few seconds).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

BATCH, DIM, HIDDEN = 64, 256, 1024


def blocks(lib):
    """The two blocks, written once against `lib.nn` (fusegrad or torch)."""
    nn = lib.nn
    F = nn.functional

    class GeluMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(DIM, HIDDEN)
            self.fc2 = nn.Linear(HIDDEN, DIM)

        def forward(self, x):
            return (self.fc2(F.gelu(self.fc1(x))),)  # a tuple, as torch's AOT needs

    class LayerNormBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(DIM)
            self.fc1 = nn.Linear(DIM, HIDDEN)
            self.fc2 = nn.Linear(HIDDEN, DIM)

        def forward(self, x):
            return (x + self.fc2(F.gelu(self.fc1(self.ln(x)))),)

    return {"GELU MLP": GeluMLP, "LayerNorm block": LayerNormBlock}


def saved_bytes(bw_graph) -> int:
    """Bytes of a backward graph's inputs that are not tangents (what the forward saved)."""
    total = 0
    for n in bw_graph.nodes:
        if n.op == "placeholder" and not n.name.startswith("tangents"):
            val = n.meta["val"]
            total += val.numel() * val.element_size()
    return total


def recorder(into: list):
    def compiler(gm, example_inputs):
        into.append(gm)
        return gm.forward
    return compiler


def fusegrad_bytes(cls, state, x, partition) -> int:
    """Saved bytes under `partition`; asserts output and gradients equal eager's."""
    import fusegrad
    from fusegrad._functorch.aot_autograd import aot_module_simplified

    graphs: list = []
    model, eager = cls(), cls()
    model.load_state_dict(state)
    eager.load_state_dict(state)
    compiled = aot_module_simplified(model, [x], recorder(graphs), recorder(graphs),
                                     partition_fn=partition)
    xc, xe = (fusegrad.tensor(x.detach().numpy(), requires_grad=True) for _ in range(2))
    out, ref = compiled(xc)[0], eager(xe)[0]
    out.sum().backward()
    ref.sum().backward()
    assert compiled.fallback_reason is None, compiled.fallback_reason
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    pairs = [(xc, xe)] + list(zip(model.parameters(), eager.parameters()))
    for a, b in pairs:
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)
    return saved_bytes(graphs[1].graph)


def torch_bytes(cls, x) -> int:
    """Saved bytes of torch's min-cut partition of the same block."""
    import torch
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    graphs: list = []
    model = cls()
    compiled = aot_module_simplified(torch.fx.symbolic_trace(model), [x],
                                     fw_compiler=recorder(graphs), bw_compiler=recorder(graphs),
                                     partition_fn=min_cut_rematerialization_partition)
    x = x.clone().requires_grad_(True)
    out = compiled(x)
    out[0].sum().backward()
    return saved_bytes(graphs[1].graph)


def main() -> list:
    """Rows (block, default bytes, min-cut bytes, torch min-cut bytes); printed as a table."""
    import torch

    import fusegrad
    from fusegrad._functorch.partitioners import (
        default_partition,
        min_cut_rematerialization_partition,
    )

    rows = []
    th_blocks, fg_blocks = blocks(torch), blocks(fusegrad)
    for name in th_blocks:
        torch.manual_seed(0)
        th_model = th_blocks[name]()
        state = {k: fusegrad.tensor(v.detach().numpy().copy())
                 for k, v in th_model.state_dict().items()}
        x = np.random.default_rng(0).standard_normal((BATCH, DIM)).astype(np.float32)
        fx = fusegrad.tensor(x, requires_grad=True)
        default = fusegrad_bytes(fg_blocks[name], state, fx, default_partition)
        mincut = fusegrad_bytes(fg_blocks[name], state, fx, min_cut_rematerialization_partition)
        torch.manual_seed(0)
        th = torch_bytes(th_blocks[name], torch.tensor(x, requires_grad=True))
        rows.append((name, default, mincut, th))
    print(f"float32, batch {BATCH}, {DIM} -> {HIDDEN} -> {DIM}; bytes saved for backward")
    print(f"{'block':<16} {'default':>10} {'min-cut':>10} {'torch min-cut':>14}")
    for name, d, m, t in rows:
        print(f"{name:<16} {d:>10,} {m:>10,} {t:>14,}")
    return rows


if __name__ == "__main__":
    main()
