"""The second seed document's autograd examples, run as programs under torch and fusegrad:
printed output (values to 6 significant digits, node names) must be identical."""

import torch
from oracle import fg, normalize_output, run_program

MYRELU = '''
import torch
torch.manual_seed(0)
class MyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[input < 0] = 0
        return grad_input

x = torch.tensor([-1.5, 0.5, -0.25, 2.0, 3.0, -4.0, 0.75, -0.1, 1.0, 0.0], requires_grad=True)
y = MyReLU.apply(x)
print(y)
print(y.grad_fn)
(y * torch.arange(10.0)).sum().backward()
print(x.grad)
'''

PROGRAM = '''
import torch

# 1. the dynamic graph and its nodes
x = torch.tensor([1.0], requires_grad=True)
y = x * 2
z = y.mean()
z.backward()
print(x.grad)
print(type(z.grad_fn).__name__)
print([(type(f).__name__, i) for f, i in z.grad_fn.next_functions])
print([(type(f).__name__, i) for f, i in y.grad_fn.next_functions])

def walk(fn, depth=0):
    if fn is None:
        return
    print("  " * depth + type(fn).__name__)
    for nxt, _ in fn.next_functions:
        walk(nxt, depth + 1)

w1 = torch.tensor([[0.5, -0.2], [0.1, 0.3], [-0.4, 0.6]], requires_grad=True)
w2 = torch.tensor([[1.0], [-1.0]], requires_grad=True)
inp = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]])
out = ((inp @ w1).tanh() @ w2).sum()
walk(out.grad_fn)

# 2. freezing parameters with requires_grad_(False)
for p in [w1]:
    p.requires_grad_(False)
out = ((inp @ w1).tanh() @ w2).sum()
out.backward()
print(w1.grad, w2.grad)
walk(out.grad_fn)
w1.requires_grad_(True)

# 3. no_grad inference
with torch.no_grad():
    pred = (inp @ w1).tanh() @ w2
print(pred.requires_grad, pred.grad_fn)

# 4. truncated backpropagation through time: detach the hidden state
Wx = torch.tensor([[0.2, -0.1, 0.4], [0.3, 0.2, -0.5]], requires_grad=True)
Wh = torch.tensor([[0.1, 0.0, 0.2], [-0.3, 0.5, 0.1], [0.2, 0.2, -0.1]], requires_grad=True)
seq = torch.tensor([[[0.5, -1.0]], [[1.5, 0.2]], [[-0.3, 0.8]], [[0.9, 0.1]],
                    [[0.0, -0.6]], [[1.1, 0.4]]])
h = torch.zeros(1, 3)
for chunk in range(3):
    loss = 0
    for t in range(2):
        h = (seq[2 * chunk + t] @ Wx + h @ Wh).tanh()
        loss = loss + (h ** 2).sum()
    loss.backward()
    print(chunk, round(loss.item(), 6), Wx.grad.sum().item(), Wh.grad.sum().item())
    h = h.detach()
    print(h.requires_grad, h.grad_fn)

# 5. gradient accumulation over micro-batches
W = torch.tensor([[0.1, -0.2], [0.3, 0.4]], requires_grad=True)
data = torch.tensor([[1.0, 2.0], [0.5, -1.0], [2.0, 0.0], [-1.0, 1.0]])
targets = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
accumulation_steps = 2
for i in range(4):
    out = data[i:i + 1] @ W
    loss = ((out - targets[i:i + 1]) ** 2).mean()
    loss = loss / accumulation_steps
    loss.backward()
    if (i + 1) % accumulation_steps == 0:
        print("step", i, W.grad)
        with torch.no_grad():
            W -= 0.1 * W.grad
        W.grad.zero_()
print(W)
full = ((data @ W - targets) ** 2).mean()
print(full.item())

# 6. modifying the graph walk: visit every node once, counting by name
def count(fn, seen, counts):
    if fn is None or fn in seen:
        return counts
    seen.add(fn)
    counts[type(fn).__name__] = counts.get(type(fn).__name__, 0) + 1
    for nxt, _ in fn.next_functions:
        count(nxt, seen, counts)
    return counts
print(sorted(count(full.grad_fn, set(), {}).items()))
'''


def _compare(src):
    expected = normalize_output(run_program(src, torch)).splitlines()
    got = normalize_output(run_program(src, fg)).splitlines()
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"line {i + 1}:\n  got      {g!r}\n  expected {e!r}"
    assert len(got) == len(expected)
    return expected


def test_seed2_examples_print_like_torch():
    lines = _compare(PROGRAM)
    assert any("AccumulateGrad" in line for line in lines)


def test_seed2_myrelu_exact_code():
    lines = _compare(MYRELU)
    assert any("MyReLUBackward object at" in line for line in lines)


def test_seed2_myrelu_with_where():
    src = MYRELU.replace("grad_input[input < 0] = 0", "grad_input = torch.where(input < 0, "
                         "0.0, grad_input)")
    _compare(src)
