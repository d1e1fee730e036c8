"""The end of ANY optimizer's step() is a sync point on the lazy device (optim/optimizer.py
_ending_the_step): the base optimizers', a subclass's that overrides step() without calling the
base's, and one whose step() calls super().step() (ending once, after all its work). Each
step also counts for the schedulers' call-order check, as PyTorch's wrapped step does."""

import warnings

import numpy as np

import loom


class PlainSGD(loom.optim.Optimizer):
    """A user's optimizer as PyTorch's examples write them: step() of its own."""

    def __init__(self, params, lr):
        super().__init__(params, {"lr": lr})

    @loom.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return None


class ExtraWork(loom.optim.SGD):
    """step() calls the base's, then updates more: the step ends after both."""

    @loom.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                p.mul_(0.5)
        return loss


def run(make, steps=3):
    w = loom.ones(4, device="lazy", requires_grad=True)
    opt = make([w])
    step_syncs = []
    for _ in range(steps):
        opt.zero_grad()
        (w * w).sum().backward()
        before = loom.metrics()["syncs_step"]
        opt.step()
        step_syncs.append(loom.metrics()["syncs_step"] - before)
    return w, step_syncs, opt


def test_every_optimizers_step_ends_with_one_sync():
    for make in [lambda p: loom.optim.SGD(p, lr=0.1), lambda p: PlainSGD(p, lr=0.1),
                 lambda p: ExtraWork(p, lr=0.1)]:
        w, syncs, opt = run(make)
        assert syncs == [1, 1, 1], (make, syncs)
        assert opt._step_count == 3


def test_overridden_steps_compute_what_eager_computes():
    for cls, factor in [(PlainSGD, 1.0), (ExtraWork, 0.5)]:
        values = []
        for device in ["cpu", "lazy"]:
            w = loom.ones(4, device=device, requires_grad=True)
            opt = cls([w], lr=0.1)
            for _ in range(3):
                opt.zero_grad()
                (w * w).sum().backward()
                opt.step()
            values.append(w.detach().cpu().numpy())
        expected = np.ones(4)
        for _ in range(3):
            expected = (expected - 0.1 * 2 * expected) * factor
        np.testing.assert_allclose(values[0], expected, rtol=1e-6)
        np.testing.assert_allclose(values[1], values[0], rtol=1e-6)


def test_a_scheduler_sees_an_overridden_step():
    w = loom.ones(2, requires_grad=True)
    opt = PlainSGD([w], lr=0.1)
    sched = loom.optim.lr_scheduler.StepLR(opt, 1)
    (w * w).sum().backward()
    opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sched.step()  # no "lr_scheduler.step() before optimizer.step()" warning
