"""DistributedDataParallel, as torch.nn.parallel: data-parallel training over a process group.

Each rank runs the wrapped module on its own part of the batch; after backward, the gradients
are averaged over the ranks, so every rank's optimizer applies the same update and the replicas
stay equal. At construction the parameters and buffers are broadcast from rank 0.

How the gradients move. Parameters are put in buckets (reverse order of registration, as
PyTorch's, at most bucket_cap_mb each, one dtype and device per bucket); after backward, each
bucket's gradients are concatenated into one flat tensor, divided by the group's size, summed
over the ranks by ONE all_reduce, and split back into the parameters' .grad. On lazy tensors all
of it is ops of the step's trace: a DDP training step is one trace and one cached plan whose
collective steps are the buckets' all-reduces (inside the step's CUDA Graph on a GPU).

Differences from PyTorch, on purpose:
  - state_dict() has no "module." prefix: a checkpoint of a DDP model loads into the bare model
    and back; load_state_dict() accepts either form.
  - Gradients are reduced when backward() returns (loom's autograd has no per-gradient hooks; in
    lazy mode backward only records ops, so there is nothing to overlap).
  - static_graph, delay_all_reduce_named_params and communication hooks are not supported.
"""

import contextlib
import weakref

import loom
from loom import _C, autograd
from loom import distributed as dist
from loom.nn.modules.module import Module


class _Bucket:
    def __init__(self, params):
        self.params = params  # in bucket order
        self.sizes = [p.numel() for p in params]


def _bucketize(params, cap_bytes):
    """Buckets of parameters (reverse order, one dtype and device each, at most cap_bytes)."""
    buckets, current, current_bytes, key = [], [], 0, None
    for p in reversed(params):
        k = (p.dtype, str(p.device))
        nbytes = p.numel() * p.element_size()
        if current and (k != key or current_bytes + nbytes > cap_bytes):
            buckets.append(_Bucket(current))
            current, current_bytes = [], 0
        current.append(p)
        current_bytes += nbytes
        key = k
    if current:
        buckets.append(_Bucket(current))
    return buckets


def _coalesced_broadcast(tensors, src, group):
    """Broadcasts tensors from src with one collective per dtype and device (in place)."""
    groups = {}
    for t in tensors:
        groups.setdefault((t.dtype, str(t.device)), []).append(t)
    for same in groups.values():
        flat = loom.cat([t.detach().reshape(-1) for t in same])
        dist.broadcast(flat, src, group=group)
        start = 0
        for t in same:
            n = t.numel()
            # Into t itself, not an alias of it (t.detach()): a lazy write through an alias makes
            # the next write to t sync first (BatchNorm's num_batches_tracked.add_), a second
            # trace per step, and a sync point that keeps loom.compile from capturing the step.
            t.copy_(flat[start:start + n].view(t.shape))
            start += n


class DistributedDataParallel(Module):
    """Wraps `module` for data-parallel training over `process_group` (the world by default).
    device_ids/output_device are accepted for PyTorch's signature (the module stays where it is)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=25, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if static_graph:
            raise NotImplementedError("DistributedDataParallel(static_graph=True) is not supported by loom")
        if not dist.is_initialized():
            raise RuntimeError("Default process group has not been initialized, please make sure to call "
                               "init_process_group.")
        self.module = module
        self.process_group = process_group if process_group is not None else dist.group.WORLD
        self.device_ids = device_ids
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        self.require_backward_grad_sync = True
        self._ranks = dist.get_process_group_ranks(self.process_group)
        self._size = len(self._ranks)
        seen, params = set(), []
        for p in module.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                params.append(p)
        if not params:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        self._params = params
        self._buckets = _bucketize(params, self.bucket_bytes_cap)
        self._armed = False  # a forward ran whose backward must reduce the gradients
        with loom.no_grad():
            _coalesced_broadcast(list(module.parameters()) + list(module.buffers()), self._ranks[0],
                                 self.process_group)
        if params[0].is_lazy:
            loom.sync()  # the broadcast is set-up: not part of the first step's trace
        me = weakref.ref(self)
        handle = autograd._on_backward_end(lambda: me() is not None and me()._after_backward())
        weakref.finalize(self, handle.remove)

    # ---- PyTorch's surface ----

    def forward(self, *inputs, **kwargs):
        lazy = self._params[0].is_lazy
        if lazy and _C._dist_pending(self._params[0].device):
            # The last step's all-reduces have not run (no rank read a value since): run them now,
            # so that each step is one trace and every rank's traces match (see
            # lazy/collectives.h, Note [Collectives run in program order]).
            loom.sync()
        if loom.is_grad_enabled() and self.require_backward_grad_sync:
            self._armed = True
        if self.broadcast_buffers and self.require_backward_grad_sync:
            buffers = list(self.module.buffers())
            if buffers:
                with loom.no_grad():
                    _coalesced_broadcast(buffers, self._ranks[0], self.process_group)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of the backward passes inside accumulate locally, unreduced; the first
        backward after the block reduces the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """The wrapped module's state dict: no "module." prefix (unlike PyTorch)."""
        return self.module.state_dict(destination, prefix, keep_vars)

    def load_state_dict(self, state_dict, strict=True):
        """Loads the wrapped module's state from a dict with or without the "module." prefix."""
        keys = list(state_dict.keys())
        if keys and all(isinstance(k, str) and k.startswith("module.") for k in keys):
            state_dict = type(state_dict)((k[len("module."):], v) for k, v in state_dict.items())
        return self.module.load_state_dict(state_dict, strict)

    # ---- the reduction ----

    def _after_backward(self):
        if not self._armed:
            return
        self._armed = False
        with loom.no_grad():
            used = self._globally_used() if self.find_unused_parameters else None
            for bucket in self._buckets:
                self._reduce(bucket, used)

    def _globally_used(self):
        """Which parameters got a gradient on some rank: a small all-reduce of host flags, run at
        once (an eager tensor), so lazy training does not sync for it."""
        device = "cpu" if self.process_group is None or dist.get_backend(self.process_group) == "gloo" \
            else self.process_group._device
        flags = loom.tensor([0 if p.grad is None else 1 for p in self._params], dtype=loom.int32, device=device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.process_group)
        return {id(p): bool(f) for p, f in zip(self._params, flags.tolist())}

    def _reduce(self, bucket, used):
        grads = []
        for p in bucket.params:
            if p.grad is not None:
                grads.append(p.grad.reshape(-1))
            elif used is not None:
                grads.append(loom.zeros(p.numel(), dtype=p.dtype, device=p.device))
            else:
                missing = [i for i, q in enumerate(self._params) if q.grad is None]
                raise RuntimeError(
                    "Expected to have finished reduction in the prior iteration before starting a new one. This "
                    "error indicates that your module has parameters that were not used in producing loss. You can "
                    "enable unused parameter detection by passing the keyword argument `find_unused_parameters=True` "
                    "to `loom.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function "
                    "outputs participate in calculating loss.\nParameter indices which did not receive grad for rank "
                    f"{dist.get_rank()}: {' '.join(map(str, missing))}")
        flat = loom.cat(grads) if len(grads) > 1 else grads[0]
        # Divided before the sum, as PyTorch does (keeps float16 sums in range); in lazy mode the
        # division fuses into the concatenation.
        flat = flat / self._size
        total = _C._dist_op("all_reduce", flat, self.process_group._id, int(dist.ReduceOp.SUM), 0, None)
        start = 0
        for p, n in zip(bucket.params, bucket.sizes):
            view = total[start:start + n].view(p.shape)
            start += n
            if used is not None and not used[id(p)]:
                continue  # no rank used it: its gradient stays None, as in PyTorch
            if self.gradient_as_bucket_view or p.grad is None:
                p.grad = view  # a view of the bucket
            else:
                p.grad.copy_(view)
