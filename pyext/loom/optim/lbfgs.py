"""L-BFGS, as torch.optim.LBFGS: limited-memory BFGS (Nocedal and Wright, Numerical Optimization,
algorithms 7.4 and 7.5) with an optional strong-Wolfe line search (their algorithms 3.5 and 3.6,
with cubic interpolation).

Unlike the other optimizers, it works on all parameters as one flat vector and decides what to
do from values: whether a direction descends, whether the line search's conditions hold, when to
stop. Each of those is a number read from the device, so in lazy mode a step is a series of
syncs (the closure's loss, dot products), as on a GPU in PyTorch; the flat vectors and the
two-loop recursion are ordinary loom ops in between. The choices that decide its trajectory are
PyTorch's (the first step's length, the curvature test, the stopping tests, the line search's
bracketing and safeguards), so the same problem follows the same iterates.
"""

import loom
from loom.optim.optimizer import Optimizer


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2, clamped to
    `bounds` (default: the interval between x1 and x2); the interval's middle when the cubic has
    no minimum."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    discriminant = d1 * d1 - g1 * g2
    if discriminant < 0:
        return (low + high) / 2
    d2 = discriminant ** 0.5
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, low), high)


class _Point:
    """A trial step length t with the loss, flat gradient and directional derivative there. The
    gradients are never written in place (each evaluation makes a new one), so points share them."""

    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step length along d meeting the strong Wolfe conditions (sufficient decrease c1,
    curvature c2), from the initial guess t: first grow the step until an interval is known to
    hold one (bracketing), then shrink that interval by cubic interpolation (zoom). `evaluate(t)`
    returns (loss, flat gradient) at x + t d. Returns (loss, gradient, t, evaluations)."""
    d_norm = float(d.abs().max())
    start = _Point(0.0, f, g, gtd)
    f_new, g_new = evaluate(t)
    evals, iters = 1, 0
    trial = _Point(t, f_new, g_new, float(g_new.dot(d)))
    previous = start
    bracket, done = None, False
    while iters < max_ls:
        if trial.f > f + c1 * trial.t * gtd or (iters > 1 and trial.f >= previous.f):
            bracket = [previous, trial]
            break
        if abs(trial.gtd) <= -c2 * gtd:
            bracket, done = [trial], True
            break
        if trial.gtd >= 0:
            bracket = [previous, trial]
            break
        # still descending past t: extrapolate, at least a little and at most tenfold
        t = _cubic_minimum(previous.t, previous.f, previous.gtd, trial.t, trial.f, trial.gtd,
                           bounds=(trial.t + 0.01 * (trial.t - previous.t), trial.t * 10))
        previous = trial
        f_new, g_new = evaluate(t)
        evals += 1
        iters += 1
        trial = _Point(t, f_new, g_new, float(g_new.dot(d)))
    if iters == max_ls:  # no interval found in time: the last trial, or the start if it was worse
        bracket = [start, trial]

    # zoom: bracket[low] is the best point so far; the minimizer lies between the two
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    insufficient_progress = False
    while not done and iters < max_ls:
        a, b = bracket
        if abs(b.t - a.t) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        lo, hi = min(a.t, b.t), max(a.t, b.t)
        eps = 0.1 * (hi - lo)
        if min(hi - t, t - lo) < eps:  # too close to an end: move inward, unless that already failed once
            if insufficient_progress or t >= hi or t <= lo:
                t = hi - eps if abs(t - hi) < abs(t - lo) else lo + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        iters += 1
        point = _Point(t, f_new, g_new, float(g_new.dot(d)))
        if point.f > f + c1 * t * gtd or point.f >= bracket[low].f:
            bracket[high] = point
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(point.gtd) <= -c2 * gtd:
                done = True
            elif point.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = point
    best = bracket[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """L-BFGS over all parameters (one parameter group). step(closure) requires the closure, which
    clears the gradients, computes the loss, calls backward() and returns the loss; it may be called
    several times per step (up to max_eval)."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the parameters as one flat vector ----

    def _flat_grad(self):
        return loom.cat([(p.grad if p.grad is not None else loom.zeros_like(p)).reshape(-1) for p in self._params])

    def _move(self, step, direction):
        """params += step * direction (direction flat, in the parameters' order)."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].view_as(p), alpha=step)
            offset += n

    def _evaluate(self, closure, x, t, d):
        """(loss, flat gradient) at x + t d; the parameters are x again after."""
        self._move(t, d)
        with loom.enable_grad():
            loss = float(closure())
        flat_grad = self._flat_grad()
        for p, value in zip(self._params, x):
            p.copy_(value)
        return loss, flat_grad

    # ---- the step ----

    @loom.no_grad()
    def step(self, closure):
        """Runs up to max_iter iterations of L-BFGS; returns the closure's first loss."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure: step(closure), the closure computing the loss and its "
                               "gradients")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")

        # the history lives in the first parameter's state, as PyTorch keeps it
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with loom.enable_grad():
            first_loss = closure()
        loss = float(first_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(flat_grad.abs().max()) <= tolerance_grad:  # already optimal
            return first_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_steps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        iters = 0
        while iters < max_iter:
            iters += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_steps, ro, h_diag = [], [], [], 1.0
            else:
                # the curvature pair of the last move; kept only when it has positive curvature
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y.dot(s))
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_steps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_steps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y.dot(y))
                # two-loop recursion: d = -H grad, H the inverse Hessian the history implies
                alphas = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    alphas[i] = float(old_steps[i].dot(q)) * ro[i]
                    q = q - old_dirs[i] * alphas[i]
                d = q * h_diag
                for i in range(len(old_dirs)):
                    beta = float(old_dirs[i].dot(d)) * ro[i]
                    d = d + old_steps[i] * (alphas[i] - beta)
            prev_flat_grad = flat_grad
            prev_loss = loss

            # the first step is scaled by the gradient, as it has no curvature to go by
            t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr if state["n_iter"] == 1 else lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tolerance_change:  # not a descent direction
                break

            optimal = False
            if line_search_fn is not None:
                x = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_evals = _strong_wolfe(lambda step: self._evaluate(closure, x, step, d), t, d,
                                                             loss, flat_grad, gtd)
                self._move(t, d)
                optimal = float(flat_grad.abs().max()) <= tolerance_grad
            else:
                self._move(t, d)
                ls_evals = 0
                if iters != max_iter:  # the last iteration's loss is not needed: the next step computes it
                    with loom.enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    optimal = float(flat_grad.abs().max()) <= tolerance_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if (iters == max_iter or evals >= max_eval or optimal
                    or float((d * t).abs().max()) <= tolerance_change or abs(loss - prev_loss) < tolerance_change):
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_steps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return first_loss
