"""Whole objects in checkpoints, against PyTorch: `save(model)` pickles modules and
optimizers by reference, `load(weights_only=False)` rebuilds them (a file saved by PyTorch
into fusegrad's classes), and the default weights-only load refuses them with PyTorch's
error unless they are allowlisted."""

import pickle

import numpy as np
import pytest
import torch

import fusegrad


def _torch_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(4 * 3 * 3, 5),
        torch.nn.Dropout(0.1)).eval()


class _Seq(torch.nn.Module):
    """An LSTM and an encoder layer with attention, in one module."""

    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 6, batch_first=True)
        self.enc = torch.nn.TransformerEncoderLayer(6, 2, 12, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(6, 2)

    def forward(self, x):
        return self.head(self.enc(self.lstm(x)[0]))


_X = np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32)


def test_model_saved_by_pytorch_loads_into_fusegrad_classes(tmp_path):
    model = _torch_model()
    torch.save({"model": model, "epoch": 3}, tmp_path / "whole.pt")
    back = fusegrad.load(tmp_path / "whole.pt", weights_only=False)
    ours = back["model"]
    assert back["epoch"] == 3 and type(ours) is fusegrad.nn.Sequential
    assert type(ours[1]).__module__ == "fusegrad.nn.modules.batchnorm"
    assert repr(ours) == repr(model) and not ours.training
    want = model(torch.tensor(_X)).detach().numpy()
    np.testing.assert_allclose(ours(fusegrad.tensor(_X)).detach().numpy(), want, atol=1e-6)


def test_recurrent_and_attention_modules_load_from_pytorch(tmp_path):
    torch.manual_seed(1)
    model = _Seq().eval()
    torch.save(model.lstm, tmp_path / "lstm.pt")
    torch.save(model.enc, tmp_path / "enc.pt")
    lstm = fusegrad.load(tmp_path / "lstm.pt", weights_only=False)
    enc = fusegrad.load(tmp_path / "enc.pt", weights_only=False)
    x = np.random.default_rng(1).standard_normal((2, 5, 6)).astype(np.float32)
    with torch.no_grad():
        h = model.lstm(torch.tensor(x))[0]
        want = model.enc(h).numpy()
    got = enc(lstm(fusegrad.tensor(x))[0]).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_default_load_refuses_with_pytorchs_error(tmp_path):
    torch.save(_torch_model(), tmp_path / "whole.pt")
    with pytest.raises(pickle.UnpicklingError) as theirs:
        torch.load(tmp_path / "whole.pt")
    with pytest.raises(pickle.UnpicklingError) as ours:
        fusegrad.load(tmp_path / "whole.pt")
    assert str(ours.value) == str(theirs.value)


def test_unsafe_globals_listed_as_pytorch_lists_them(tmp_path):
    torch.save({"m": _torch_model(), "opt": None}, tmp_path / "whole.pt")
    torch.save(_torch_model().state_dict(), tmp_path / "sd.pt")
    for name in ("whole.pt", "sd.pt"):
        want = torch.serialization.get_unsafe_globals_in_checkpoint(tmp_path / name)
        got = fusegrad.serialization.get_unsafe_globals_in_checkpoint(tmp_path / name)
        assert sorted(got) == sorted(want)


def test_allowlisted_classes_load_with_weights_only(tmp_path):
    torch.save(_torch_model(), tmp_path / "whole.pt")
    nn = fusegrad.nn
    allowed = [nn.Sequential, nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d, nn.Flatten,
               nn.Linear, nn.Dropout]
    before = fusegrad.serialization.get_safe_globals()
    with fusegrad.serialization.safe_globals(allowed):
        ours = fusegrad.load(tmp_path / "whole.pt")
        assert fusegrad.serialization.get_unsafe_globals_in_checkpoint(
            tmp_path / "whole.pt") == []
    assert fusegrad.serialization.get_safe_globals() == before
    with pytest.raises(pickle.UnpicklingError):
        fusegrad.load(tmp_path / "whole.pt")
    want = _torch_model()(torch.tensor(_X)).detach().numpy()
    np.testing.assert_allclose(ours(fusegrad.tensor(_X)).detach().numpy(), want, atol=1e-6)
    fusegrad.serialization.add_safe_globals(allowed[:1])
    try:
        assert fusegrad.serialization.get_safe_globals()[-1] is nn.Sequential
    finally:
        fusegrad.serialization.clear_safe_globals()
    assert fusegrad.serialization.get_safe_globals() == []


def test_fusegrad_whole_objects_round_trip_with_identity_and_state(tmp_path):
    nn = fusegrad.nn
    fusegrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 4), nn.Linear(4, 3))
    model[3].weight = nn.Parameter(model[2].weight[:3].detach().clone())
    model[2].bias = model[0].bias  # tied
    opt = fusegrad.optim.Adam(model.parameters(), lr=0.05)
    x = fusegrad.randn(5, 3)
    model(x).pow(2).sum().backward()
    opt.step()
    fusegrad.save({"model": model, "opt": opt, "step": 1}, tmp_path / "ck.pt")
    back = fusegrad.load(tmp_path / "ck.pt", weights_only=False)
    m2, opt2 = back["model"], back["opt"]
    assert m2[2].bias is m2[0].bias
    assert opt2.param_groups[0]["params"][0] is m2[0].weight
    for m, o in ((model, opt), (m2, opt2)):  # both continue identically
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
    for a, b in zip(model.parameters(), m2.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    # PyTorch reads the tensors of a fusegrad state_dict as before
    fusegrad.save(model.state_dict(), tmp_path / "sd.pt")
    sd = torch.load(tmp_path / "sd.pt")
    np.testing.assert_array_equal(sd["0.weight"].numpy(), model[0].weight.detach().numpy())


def test_weights_only_load_of_a_whole_object_never_runs_its_code(tmp_path):
    ran = []

    class Loud(fusegrad.nn.Module):
        def __setstate__(self, state):
            ran.append(1)
            super().__setstate__(state)

    globals()["Loud"] = Loud  # picklable by reference
    Loud.__qualname__ = "Loud"
    try:
        fusegrad.save(Loud(), tmp_path / "loud.pt")
        with pytest.raises(pickle.UnpicklingError):
            fusegrad.load(tmp_path / "loud.pt")
        assert ran == []
        fusegrad.load(tmp_path / "loud.pt", weights_only=False)
        assert ran == [1]
    finally:
        del globals()["Loud"]
