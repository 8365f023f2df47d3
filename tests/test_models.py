"""Reference models: ResNet-18 with torchvision's layout loads a torch.save'd state_dict and
gives torch's logits; LeNet-5 and the MLP train like their torch twins."""

from __future__ import annotations

import inspect
import io

import numpy as np
import torch
from test_nn_support import compare_modules

import fusegrad
import fusegrad.models as fm
import fusegrad.nn as fnn
from fusegrad.models import resnet as fresnet
from fusegrad.models import simple as fsimple


def torch_twin(module):
    """Execute a fusegrad model module's source with torch.nn in place of fusegrad.nn."""
    src = inspect.getsource(module).replace("from .. import nn", "from torch import nn")
    ns = {"__name__": "twin"}
    exec(compile(src, module.__name__, "exec"), ns)
    return ns


TORCHVISION_KEYS = [  # resnet18's state_dict keys as torchvision names them (a sample)
    "conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
    "bn1.num_batches_tracked", "layer1.0.conv1.weight", "layer1.0.bn2.running_var",
    "layer1.1.conv2.weight", "layer2.0.downsample.0.weight", "layer2.0.downsample.1.weight",
    "layer3.1.bn1.num_batches_tracked", "layer4.0.downsample.1.running_mean",
    "layer4.1.bn2.bias", "fc.weight", "fc.bias"]


def test_resnet18_layout():
    m = fm.resnet18()
    keys = list(m.state_dict())
    assert len(keys) == 122
    assert all(k in keys for k in TORCHVISION_KEYS)
    assert sum(p.numel() for p in m.parameters()) == 11689512
    assert fm.resnet18(num_classes=10).fc.out_features == 10


def test_resnet50_layout_matches_torchvision_counts():
    m = fm.resnet50()
    assert len(m.state_dict()) == 320
    assert sum(p.numel() for p in m.parameters()) == 25557032
    assert list(m.state_dict()) == list(torch_twin(fresnet)["resnet50"]().state_dict())


def test_resnet18_loads_torch_checkpoint_and_matches_logits():
    twin = torch_twin(fresnet)
    torch.manual_seed(0)
    th = twin["resnet18"](num_classes=10)
    with torch.no_grad():  # non-trivial running statistics
        th.train()
        th(torch.randn(4, 3, 64, 64))
    th.eval()
    buf = io.BytesIO()
    torch.save(th.state_dict(), buf)
    buf.seek(0)
    fg = fm.resnet18(num_classes=10)
    assert repr(fg.load_state_dict(fusegrad.load(buf))) == "<All keys matched successfully>"
    fg.eval()
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    with torch.no_grad():
        ref = th(torch.tensor(x)).numpy()
    with fusegrad.no_grad():
        out = fg(fusegrad.tensor(x)).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-4, rtol=1e-4)


def test_resnet18_graph_matches_torch():
    from oracle import graph_signature

    twin = torch_twin(fresnet)
    th, fg = twin["resnet18"](num_classes=4), fm.resnet18(num_classes=4)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    sigs = [graph_signature(m(T.tensor(x)).grad_fn, list(m.parameters()))
            for m, T in ((th, torch), (fg, fusegrad))]
    assert sigs[1] == sigs[0]


def test_resnet_block_train_step_matches():
    twin = torch_twin(fresnet)
    down_t = torch.nn.Sequential(twin["conv1x1"](4, 8, 2), torch.nn.BatchNorm2d(8))
    down_f = fnn.Sequential(fresnet.conv1x1(4, 8, 2), fnn.BatchNorm2d(8))
    for block_t, block_f in (
            (twin["BasicBlock"](4, 8, 2, down_t), fresnet.BasicBlock(4, 8, 2, down_f)),
            (twin["Bottleneck"](8, 2), fresnet.Bottleneck(8, 2))):
        x = np.random.default_rng(1).standard_normal(
            (2, block_t.conv1.in_channels, 6, 6)).astype(np.float32)
        compare_modules(block_t, block_f, x, steps=3,
                        optimizer=("SGD", {"lr": 0.01, "momentum": 0.9}), atol=1e-4,
                        step_atol=1e-4)


def test_lenet5_and_mlp_match_torch():
    twin = torch_twin(fsimple)
    x = np.random.default_rng(2).standard_normal((3, 1, 32, 32)).astype(np.float32)
    compare_modules(twin["LeNet5"](), fm.LeNet5(), x,
                    optimizer=("SGD", {"lr": 1e-3, "momentum": 0.9}), atol=1e-5, step_atol=1e-4)
    x = np.random.default_rng(3).standard_normal((5, 6)).astype(np.float32)
    # (lr 0.01: at 0.1 the ten steps diverge to 1e33, where float32 rounding decides the
    # fourth digit)
    compare_modules(twin["MLP"](6, (8, 4), 3), fm.MLP(6, (8, 4), 3), x,
                    optimizer=("SGD", {"lr": 0.01, "momentum": 0.9}))


TRAIN_PROGRAM = '''
import numpy as np

rng = np.random.default_rng(0)
X = rng.standard_normal((96, 1, 12, 12)).astype(np.float32)
Y = (X[:, 0, 3:9, 3:9].mean((1, 2)) > 0).astype(np.int64)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.pool = torch.nn.MaxPool2d(2)
        self.head = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Dropout(0.0),
                                        torch.nn.Linear(4 * 6 * 6, 16), torch.nn.ReLU(),
                                        torch.nn.Linear(16, 2))

    def forward(self, x):
        return self.head(self.pool(torch.relu(self.bn(self.conv(x)))))

def train(model, state=None, epochs=5):
    if state is not None:
        model.load_state_dict(state)
    data = torch.utils.data.TensorDataset(torch.tensor(X), torch.tensor(Y))
    loader = torch.utils.data.DataLoader(data, batch_size=16, drop_last=True)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.7)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.05)
    losses = []
    for _ in range(epochs):
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            losses.append(loss.item())
        sched.step()
    model.eval()
    with torch.no_grad():
        acc = (model(torch.tensor(X)).argmax(1) == torch.tensor(Y)).float().mean().item()
    return losses, acc
'''


def test_training_program_matches_torch_step_for_step(tmp_path):
    results = {}
    for T in (torch, fusegrad):
        ns = {"torch": T}
        exec(TRAIN_PROGRAM, ns)
        torch.manual_seed(0)
        model = ns["Net"]()
        if T is torch:
            torch.save(model.state_dict(), tmp_path / "init.pt")
            state = None
        else:
            state = fusegrad.load(tmp_path / "init.pt")
        results[T.__name__] = ns["train"](model, state)
    (lt, at), (lf, af) = results["torch"], results["fusegrad"]
    np.testing.assert_allclose(lf, lt, rtol=1e-4, atol=1e-5)
    assert abs(af - at) < 0.03 and af > 0.75
