"""Training scripts of the kind people put on GitHub, run once with PyTorch and once with
fusegrad (the same program, handed the library as `T`) from the same seed and data: the losses,
learning rates, state_dicts, sampler orders and errors each run records must agree (floats to
float32 rounding, everything else exactly)."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import pytest
import torch

import fusegrad as fg


def _plain(v):
    """A record made comparable across the two libraries (tensors become NumPy arrays)."""
    if hasattr(v, "detach") and hasattr(v, "numpy"):
        return np.asarray(v.detach().numpy())
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _same(a, b, path="out") -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (path, a, b)
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6, err_msg=path)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), (path, a, b)
        for k in a:
            _same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=2e-5, abs_tol=1e-6) or (a != a and b != b), (path, a, b)
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def _compare(prog) -> None:
    """Run `prog(T)` under both libraries and compare what it returns."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _plain(prog(torch))
        got = _plain(prog(fg))
    _same(expected, got)


def _err(f):
    try:
        return ("ok", f())
    except Exception as e:  # noqa: BLE001  (the error itself is what is compared)
        return (type(e).__name__, str(e))


def test_accumulation_onecycle_clip_value_and_eval_accuracy():
    def prog(T):
        nn = T.nn
        T.manual_seed(0)
        X, y = T.randn(64, 8), T.randint(0, 3, (64,))
        model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2),
                              nn.Linear(16, 3))
        opt = T.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        sched = T.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=40)
        dl = T.utils.data.DataLoader(T.utils.data.TensorDataset(X, y), batch_size=10,
                                     shuffle=True, generator=T.Generator().manual_seed(1),
                                     drop_last=True)
        rec = []
        for _ in range(3):
            model.train()
            for i, (xb, yb) in enumerate(dl):
                loss = nn.functional.cross_entropy(model(xb), yb) / 2
                loss.backward()
                if (i + 1) % 2 == 0:
                    T.nn.utils.clip_grad_value_(model.parameters(), 0.1)
                    opt.step()
                    opt.zero_grad()
                    sched.step()
                rec.append(loss.item())
            model.eval()
            with T.no_grad():
                rec.append((T.argmax(model(X), dim=1) == y).float().mean().item())
            rec.append(sched.get_last_lr())
        vec = T.nn.utils.parameters_to_vector(model.parameters())
        T.nn.utils.vector_to_parameters(vec * 2, model.parameters())
        sd = sched.state_dict()
        return rec, model.state_dict(), sd, opt.param_groups[0]["momentum"]

    _compare(prog)


_SCHEDULERS = {
    "cawr": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-4),
    "warmup": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.CosineAnnealingLR(o, T_max=10)],
        milestones=[3]),
    "lambda": lambda S, o: S.LambdaLR(o, lambda e: 0.95 ** e),
    "chained": lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, gamma=0.9)]),
    "poly": lambda S, o: S.PolynomialLR(o, total_iters=5, power=2.0),
    "cyclic": lambda S, o: S.CyclicLR(o, [0.001, 0.002], [0.1, 0.05], step_size_up=4,
                                      step_size_down=3, mode="triangular2"),
    "onecycle": lambda S, o: S.OneCycleLR(o, [0.2, 0.1], total_steps=30, three_phase=True),
}


@pytest.mark.parametrize("name", sorted(_SCHEDULERS))
def test_scheduler_run_and_resume(name):
    def prog(T):
        S = T.optim.lr_scheduler

        def mk():
            m = T.nn.Linear(2, 1)
            return T.optim.SGD([{"params": [m.weight]}, {"params": [m.bias], "lr": 0.03}],
                               lr=0.1, momentum=0.9)

        o = mk()
        s = _SCHEDULERS[name](S, o)
        rec = []
        for i in range(20):
            o.step()
            s.step()
            rec.append([s.get_last_lr(), o.param_groups[0]["momentum"]])
            if i == 7:
                sd, osd = s.state_dict(), o.state_dict()
        o2 = mk()
        s2 = _SCHEDULERS[name](S, o2)
        o2.load_state_dict(osd)
        s2.load_state_dict(sd)
        for _ in range(12):
            o2.step()
            s2.step()
            rec.append([s2.get_last_lr(), o2.param_groups[0]["momentum"]])
        keys = sorted(k for k in sd if k not in ("_schedulers", "lr_lambdas"))
        return rec, keys

    _compare(prog)


def test_reduce_on_plateau_modes_and_resume():
    def prog(T):
        rec = []
        for kw in [dict(mode="min", factor=0.5, patience=1, threshold=0.1, cooldown=1),
                   dict(mode="max", threshold_mode="abs", threshold=0.05, patience=0,
                        min_lr=1e-3),
                   dict(mode="min", threshold_mode="rel", patience=2, eps=1e-3)]:
            o = T.optim.SGD(T.nn.Linear(2, 1).parameters(), lr=0.01)
            s = T.optim.lr_scheduler.ReduceLROnPlateau(o, **kw)
            for i, v in enumerate([1.0, 0.95, 0.94, 0.93, 0.5, 0.6, 0.7, 0.8, 0.45, 0.44]):
                s.step(T.tensor(v) if i % 2 else v)
                rec.append(o.param_groups[0]["lr"])
                if i == 6:
                    sd = s.state_dict()
            s2 = T.optim.lr_scheduler.ReduceLROnPlateau(o, **kw)
            s2.load_state_dict(sd)
            rec += [s.get_last_lr(), s.num_bad_epochs, s.cooldown_counter, float(s.best),
                    float(s2.best), s2.last_epoch]
        return rec

    _compare(prog)


def test_scheduler_call_order_warnings():
    def prog(T):
        o = T.optim.SGD(T.nn.Linear(2, 1).parameters(), lr=0.1)
        s = T.optim.lr_scheduler.StepLR(o, 2)
        out = []
        for act in (lambda: (s.step(), o.step()), lambda: s.step(5), s.get_lr):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                act()
            out.append([(x.category.__name__, str(x.message)[:60]) for x in w])
        return out

    _compare(prog)


def test_legacy_lrscheduler_subclass():
    # `_LRScheduler` is its own subclass of `LRScheduler` in PyTorch, not an alias
    def prog(T):
        S = T.optim.lr_scheduler

        class Warmup(S._LRScheduler):
            def get_lr(self):
                return [b * min(1.0, (self.last_epoch + 1) / 3) for b in self.base_lrs]

        o = T.optim.SGD(T.nn.Linear(2, 1).parameters(), lr=0.1)
        s = Warmup(o)
        lrs = []
        for _ in range(4):
            o.step()
            s.step()
            lrs.append(s.get_last_lr())
        s._initial_step()  # (called by some subclasses to restart)
        return (lrs, [c.__name__ for c in type(s).__mro__], S._LRScheduler is S.LRScheduler,
                list(s.state_dict()), s._step_count, s.get_last_lr(),
                S.EPOCH_DEPRECATION_WARNING)

    _compare(prog)


def test_ema_swa_update_bn_and_swalr():
    def prog(T):
        nn, W = T.nn, T.optim.swa_utils
        T.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
        ema = W.AveragedModel(model, multi_avg_fn=W.get_ema_multi_avg_fn(0.9))
        ema2 = W.AveragedModel(model, avg_fn=lambda a, m, n: 0.8 * a + 0.2 * m,
                               use_buffers=True)
        swa = W.AveragedModel(model)
        opt = T.optim.SGD(model.parameters(), lr=0.05)
        swalr = W.SWALR(opt, swa_lr=0.01, anneal_epochs=3, anneal_strategy="linear")
        X, Y = T.randn(40, 5), T.randn(40, 1)
        dl = T.utils.data.DataLoader(T.utils.data.TensorDataset(X, Y), batch_size=8)
        rec = []
        for _ in range(4):
            for xb, yb in dl:
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(xb), yb)
                loss.backward()
                opt.step()
                ema.update_parameters(model)
                ema2.update_parameters(model)
            swa.update_parameters(model)
            swalr.step()
            rec.append([loss.item(), swalr.get_last_lr(), opt.param_groups[0]["lr"]])
        W.update_bn(dl, swa)
        W.update_bn(((x,) for x, _ in dl), ema)
        swa.eval()
        with T.no_grad():
            out = swa(X[:3])
        return (rec, swa.state_dict(), ema.state_dict(), ema2.state_dict(), out,
                swalr.state_dict())

    _compare(prog)


def test_checkpoint_resume_with_rng_matches_uninterrupted_run():
    def prog(T):
        nn, D, S = T.nn, T.utils.data, T.optim.lr_scheduler

        def build():
            T.manual_seed(0)
            m = nn.Sequential(nn.Linear(6, 12), nn.Dropout(0.3), nn.ReLU(), nn.BatchNorm1d(12),
                              nn.Linear(12, 3))
            o = T.optim.Adam(m.parameters(), lr=1e-2, weight_decay=1e-3, amsgrad=True)
            s = S.SequentialLR(o, [S.LinearLR(o, 0.2, total_iters=3),
                                   S.CosineAnnealingWarmRestarts(o, T_0=4)], milestones=[3])
            return m, o, s

        T.manual_seed(99)
        ds = D.TensorDataset(T.randn(32, 6), T.randint(0, 3, (32,)))

        def run(m, o, s, ep0, ep1, losses):
            for ep in range(ep0, ep1):
                m.train()
                g = T.Generator()
                g.manual_seed(100 + ep)
                for xb, yb in D.DataLoader(ds, batch_size=8, shuffle=True, generator=g):
                    o.zero_grad(set_to_none=True)
                    loss = nn.functional.cross_entropy(m(xb), yb, label_smoothing=0.1)
                    loss.backward()
                    o.step()
                    losses.append(loss.item())
                s.step()

        full, part = [], []
        m, o, s = build()
        run(m, o, s, 0, 5, full)
        m, o, s = build()
        run(m, o, s, 0, 2, part)
        buf = io.BytesIO()
        T.save({"model": m.state_dict(), "opt": o.state_dict(), "sched": s.state_dict(),
                "rng": T.get_rng_state()}, buf)
        buf.seek(0)
        ck = T.load(buf, weights_only=False)
        T.manual_seed(12345)
        T.rand(7)
        m2, o2, s2 = build()
        m2.load_state_dict(ck["model"])
        o2.load_state_dict(ck["opt"])
        s2.load_state_dict(ck["sched"])
        T.set_rng_state(ck["rng"])
        run(m2, o2, s2, 2, 5, part)
        assert part == full  # exact, in each library
        return full, m2.state_dict(), s2.get_last_lr(), ck["rng"].dtype == T.uint8

    _compare(prog)


def test_samplers_splits_and_loader_orders():
    def prog(T):
        D = T.utils.data
        T.manual_seed(3)
        X = T.randn(30, 4)
        ds = D.TensorDataset(X, (X[:, 0] > 0).long())
        tr, va = D.random_split(ds, [24, 6], generator=T.Generator().manual_seed(42))
        gen = lambda s: T.Generator().manual_seed(s)  # noqa: E731
        rec = [tr.indices, va.indices,
               [len(s) for s in D.random_split(range(11), [0.5, 0.3, 0.2], generator=gen(1))],
               list(D.WeightedRandomSampler(T.tensor([0.1, 0.5, 2.0, 1.0, 0.0]), 12,
                                            generator=gen(0))),
               list(D.WeightedRandomSampler([1., 2., 3., 4.], 3, replacement=False,
                                            generator=gen(0))),
               list(D.SubsetRandomSampler([3, 5, 7, 9], generator=gen(0))),
               list(D.BatchSampler(D.SequentialSampler(range(10)), 3, False)),
               list(D.BatchSampler(range(10), 3, True)),
               list(D.RandomSampler(range(5), num_samples=12, generator=gen(5)))]
        cd = D.ConcatDataset([tr, va, D.TensorDataset(X[:2], X[:2, 0])])
        rec += [len(cd), cd.cumulative_sizes]

        def collate(batch):
            xs, ys = zip(*batch)
            return T.stack(xs).sum(1), [float(v) for v in ys]

        dl = D.DataLoader(cd, batch_size=5, shuffle=True, generator=gen(7), collate_fn=collate)
        rec += [list(dl), len(dl)]
        dl = D.DataLoader(ds, batch_sampler=D.BatchSampler(
            D.SubsetRandomSampler(range(10), generator=gen(2)), 4, False))
        rec += [[b[1] for b in dl], len(dl)]
        T.manual_seed(11)  # shuffling without a generator draws its seed from the global RNG
        dl = D.DataLoader(range(10), batch_size=3, shuffle=True, drop_last=True)
        rec += [list(dl), list(dl), T.rand(2)]
        return rec

    _compare(prog)


def test_early_stopping_on_validation_loss():
    def prog(T):
        nn = T.nn
        T.manual_seed(1)
        X, Y = T.randn(40, 3), T.randn(40, 1)
        m = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
        o = T.optim.RMSprop(m.parameters(), lr=0.05)
        sched = T.optim.lr_scheduler.ReduceLROnPlateau(o, patience=1, factor=0.5)
        best, bad, best_state, hist = float("inf"), 0, None, []
        ep = 0
        for ep in range(30):  # noqa: B007  (the stopping epoch is compared)
            m.train()
            o.zero_grad()
            nn.functional.mse_loss(m(X[:30]), Y[:30]).backward()
            o.step()
            m.eval()
            with T.no_grad():
                vl = nn.functional.mse_loss(m(X[30:]), Y[30:]).item()
            sched.step(vl)
            hist.append([vl, o.param_groups[0]["lr"]])
            if vl < best - 1e-4:
                best, bad = vl, 0
                best_state = {k: v.clone() for k, v in m.state_dict().items()}
            else:
                bad += 1
                if bad >= 3:
                    break
        return hist, ep, best_state

    _compare(prog)


def test_clip_grad_value_without_any_gradient_raises():
    def prog(T):
        m = T.nn.Linear(2, 2)
        U = T.nn.utils
        out = [_err(lambda: U.clip_grad_value_(m.parameters(), 0.1)),
               _err(lambda: U.clip_grad_value_([], 0.1, foreach=False)),
               _err(lambda: U.clip_grad_norm_(m.parameters(), 0.1))]
        m.weight.grad = T.ones(2, 2) * 3
        out += [_err(lambda: U.clip_grad_value_(m.parameters(), 0.5)), m.weight.grad,
                _err(lambda: U.clip_grad_value_(m.parameters(), None)),
                # a precomputed norm given as a number, not a tensor
                _err(lambda: U.clip_grads_with_norm_(m.parameters(), 0.1, 2.0)),
                _err(lambda: U.clip_grads_with_norm_(m.parameters(), 0.1, T.tensor(2.0))),
                m.weight.grad]
        return out

    _compare(prog)


def test_swa_recipe_with_cosine_then_swalr():
    # the recipe from PyTorch's SWA documentation: one scheduler before `swa_start`, SWALR after
    def prog(T):
        nn, W = T.nn, T.optim.swa_utils
        T.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
        X, y = T.randn(32, 4), T.randint(0, 2, (32,))
        loader = T.utils.data.DataLoader(T.utils.data.TensorDataset(X, y), batch_size=8,
                                         shuffle=True, generator=T.Generator().manual_seed(0))
        opt = T.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, nesterov=True)
        swa_model = W.AveragedModel(model)
        sched = T.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        swa_sched = W.SWALR(opt, swa_lr=0.05, anneal_epochs=2)
        rec = []
        for epoch in range(7):
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(model(xb), yb)
                loss.backward()
                opt.step()
            if epoch > 3:
                swa_model.update_parameters(model)
                swa_sched.step()
            else:
                sched.step()
            rec.append([loss.item(), opt.param_groups[0]["lr"], sched.get_last_lr(),
                        swa_sched.get_last_lr()])
        W.update_bn(loader, swa_model)
        with T.no_grad():
            correct = swa_model(X).argmax(1).eq(y).sum().item()
        return rec, correct, swa_model.state_dict()

    _compare(prog)


def test_distributed_sampler_epochs_and_step_with_epoch():
    def prog(T):
        D, S = T.utils.data, T.optim.lr_scheduler
        rec = []
        for kw in [dict(), dict(shuffle=False), dict(drop_last=True), dict(seed=3)]:
            for rank in range(3):
                s = D.DistributedSampler(range(11), num_replicas=3, rank=rank, **kw)
                for ep in range(2):
                    s.set_epoch(ep)
                    rec.append(list(s))
        # `step(epoch)` takes each scheduler's closed form, `step()` the chained one after it
        for make in [lambda o: S.StepLR(o, step_size=2), lambda o: S.CosineAnnealingLR(o, 4),
                     lambda o: S.LinearLR(o, total_iters=3),
                     lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=3, eta_min=1e-3)]:
            o = T.optim.SGD(T.nn.Linear(1, 1).parameters(), lr=0.1)
            s = make(o)
            for e in [1, 3, 2.5 if isinstance(s, S.CosineAnnealingWarmRestarts) else 2, 5, 0]:
                o.step()
                s.step(e)
                rec.append(s.get_last_lr())
            s.step()
            rec.append(s.get_last_lr())
        return rec

    _compare(prog)
