"""Weight averaging, as torch.optim.swa_utils: AveragedModel keeps a running average of a model's
parameters (stochastic weight averaging, or an exponential moving average as diffusion and GAN
trainers keep), SWALR anneals the learning rate to a constant for the averaging phase, and
update_bn recomputes batch-norm statistics for the averaged weights.

The averages are written in place with the update count as a tensor (the n_averaged buffer), so
in lazy mode an update joins the step's trace and changes no trace from step to step. Whether an
update is the first (a copy, not an average) is decided from a Python count kept beside the
buffer, so no update reads the buffer back (a sync); after load_state_dict the buffer is read
once."""

import copy
import itertools
import math

import loom
from loom.nn import Module
from loom.optim.lr_scheduler import LRScheduler, _per_group


def get_ema_multi_avg_fn(decay=0.999):
    """An exponential moving average of lists of tensors, in place: ema += (1 - decay) (current - ema)."""
    def ema_update(ema_params, current_params, num_averaged):
        for e, c in zip(ema_params, current_params):
            e.lerp_(c, 1 - decay)
    return ema_update


def get_swa_multi_avg_fn():
    """The equally weighted average of lists of tensors, in place."""
    def swa_update(averaged_params, current_params, num_averaged):
        for a, c in zip(averaged_params, current_params):
            a.add_((c - a) / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and buffers, with use_buffers=True) are the average of
    those update_parameters() was given. avg_fn(averaged, current, n) returns one averaged tensor;
    multi_avg_fn(averaged list, current list, n) updates lists in place; the default is the
    equally weighted average. As in PyTorch 2, buffers that are not averaged follow the model's;
    integer tensors (batch norm's counter) always take the model's latest value."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", loom.tensor(0, dtype=loom.long, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers
        self._host_count = 0  # n_averaged's value, known without reading it; None: read it once

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, module):
        return itertools.chain(module.parameters(), module.buffers()) if self.use_buffers else module.parameters()

    def update_parameters(self, model):
        if self._host_count is None:
            self._host_count = int(self.n_averaged.item())
        mine = [p.detach() for p in self._tensors(self.module)]
        theirs = [p.detach().to(a.device) for p, a in zip(self._tensors(model), mine)]
        with loom.no_grad():
            if self._host_count == 0:
                for a, c in zip(mine, theirs):
                    a.copy_(c)
            else:
                floating = [(a, c) for a, c in zip(mine, theirs) if a.dtype.is_floating_point]
                for a, c in zip(mine, theirs):
                    if not a.dtype.is_floating_point:
                        a.copy_(c)  # integer buffers (batch norm's counter): the latest value
                count = self.n_averaged.to(floating[0][0].device) if floating else self.n_averaged
                if self.multi_avg_fn is not None:
                    self.multi_avg_fn([a for a, _ in floating], [c for _, c in floating], count)
                else:
                    fn = self.avg_fn or get_swa_avg_fn()
                    for a, c in floating:
                        a.copy_(fn(a, c, count.to(a.device)))
            if not self.use_buffers:
                # The buffers are not averaged: they follow the model's (batch norm statistics).
                for b, source in zip(self.module.buffers(), model.buffers()):
                    b.detach().copy_(source.detach().to(b.device))
            self.n_averaged += 1
        self._host_count += 1

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._host_count = None


@loom.no_grad()
def update_bn(loader, model, device=None):
    """Recomputes the running statistics of model's batch norms from one pass over loader (as the
    cumulative average over its batches), for weights that were averaged rather than trained."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, loom.nn.modules.batchnorm._BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its value to swa_lr over anneal_epochs steps, by a
    cosine or a linear ramp, then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    def _fraction(self, step):
        return self.anneal_func(max(0.0, min(1.0, step / max(1, self.anneal_epochs))))

    def get_lr(self):
        self._warn_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        # The chainable form: recover the lr the ramp started from out of the current one (which
        # is start * (1 - a) + swa_lr * a at the previous fraction a), then move to this step's.
        before, now = self._fraction(step - 1), self._fraction(step)
        lrs = []
        for group in self.optimizer.param_groups:
            swa_lr = group["swa_lr"]
            start = swa_lr if before == 1 else (group["lr"] - before * swa_lr) / (1 - before)
            lrs.append(swa_lr * now + start * (1 - now))
        return lrs


__all__ = ["AveragedModel", "SWALR", "get_ema_avg_fn", "get_ema_multi_avg_fn", "get_swa_avg_fn",
           "get_swa_multi_avg_fn", "update_bn"]
