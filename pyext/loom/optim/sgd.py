"""SGD with momentum, dampening, Nesterov momentum and weight decay, as torch.optim.SGD."""

from loom.optim.optimizer import Optimizer, add_scaled, scale_add_


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize))

    def _update(self, p, grad, group, state):
        lr, momentum = float(group["lr"]), float(group["momentum"])
        dampening, weight_decay = float(group["dampening"]), float(group["weight_decay"])
        d_p = -grad if group["maximize"] else grad
        if weight_decay != 0:
            d_p = add_scaled(d_p, p, weight_decay)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = d_p.clone()
                state["momentum_buffer"] = buf
            else:
                scale_add_(buf, momentum, d_p, 1 - dampening)
            d_p = add_scaled(d_p, buf, momentum) if group["nesterov"] else buf
        p.add_(d_p, alpha=-lr)  # -lr is never a folded 0 or 1 (lr >= 0; -0.0 is not folded)
