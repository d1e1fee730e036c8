"""The backward hooks of one module call (Module.register_full_backward_hook and
register_full_backward_pre_hook), as PyTorch's torch.utils.hooks.BackwardHook: the call's tensor
arguments and its outputs pass through loom._C._backward_hook_function (pyext/backward_hooks.cpp),
whose callbacks see the outputs' gradients (pre-hooks may replace them) and then the
arguments' gradients (hooks may replace them)."""

import loom
from loom import _C


class BackwardHook:
    def __init__(self, module, hooks, pre_hooks):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        self.input_positions = []
        self.inputs_need_grad = False
        self.grad_outputs = None
        self.n_outputs = 0
        self.output_positions = []

    def _pack(self, positions, grads, size):
        out = [None] * size
        for position, grad in zip(positions, grads):
            out[position] = grad
        return tuple(out)

    def setup_input_hook(self, args):
        """args with their tensors replaced by ones whose gradients reach the hooks."""
        self.n_inputs = len(args)
        self.input_positions = [i for i, a in enumerate(args) if isinstance(a, loom.Tensor)]
        tensors = [args[i] for i in self.input_positions]
        self.inputs_need_grad = loom.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if not self.inputs_need_grad or not self.hooks:
            return args
        hooked = _C._backward_hook_function(tensors, self._on_input_grads)
        args = list(args)
        for i, t in zip(self.input_positions, hooked):
            args[i] = t
        return tuple(args)

    @staticmethod
    def _chain(hooks, grads, call, what, name):
        """grads passed through each hook in turn (call(hook, grads) -> replacement or None)."""
        for hook in hooks:
            result = call(hook, grads)
            if result is None:
                continue
            if len(result) != len(grads):
                raise RuntimeError(f"{what} returned an invalid number of {name}, got {len(result)}, but expected "
                                   f"{len(grads)}")
            grads = tuple(result)
        return grads

    def _run_hooks(self, grad_inputs):
        return self._chain(self.hooks, grad_inputs, lambda hook, g: hook(self.module, g, self.grad_outputs),
                           "Backward hook", "grad_input")

    def _on_input_grads(self, grads):
        grad_inputs = self._run_hooks(self._pack(self.input_positions, grads, self.n_inputs))
        self.grad_outputs = None
        return tuple(grad_inputs[i] for i in self.input_positions)

    def _on_output_grads(self, grads):
        grad_outputs = self._chain(self.pre_hooks, self._pack(self.output_positions, grads, self.n_outputs),
                                   lambda hook, g: hook(self.module, g), "Backward pre hook", "grad_output")
        self.grad_outputs = grad_outputs
        if not self.inputs_need_grad:  # no input gradient will come: the hooks run now, as PyTorch's
            self._run_hooks((None,) * self.n_inputs)
            self.grad_outputs = None
        return tuple(grad_outputs[i] for i in self.output_positions)

    def setup_output_hook(self, result):
        """The call's result, its tensors replaced by ones whose gradients reach the hooks."""
        single = isinstance(result, loom.Tensor)
        outputs = (result,) if single else result
        if not isinstance(outputs, tuple):
            return result
        self.n_outputs = len(outputs)
        self.output_positions = [i for i, o in enumerate(outputs) if isinstance(o, loom.Tensor)]
        tensors = [outputs[i] for i in self.output_positions]
        if not (loom.is_grad_enabled() and any(t.requires_grad for t in tensors)):
            return result
        hooked = _C._backward_hook_function(tensors, self._on_output_grads)
        outputs = list(outputs)
        for i, t in zip(self.output_positions, hooked):
            outputs[i] = t
        return outputs[0] if single else tuple(outputs)
