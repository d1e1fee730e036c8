"""AdaptiveLogSoftmaxWithLoss (torch.nn): the log-probabilities of a large vocabulary, cheaply
(Grave et al., "Efficient softmax approximation for GPUs").

Classes are split by `cutoffs` into a shortlist [0, cutoffs[0]) and clusters [cutoffs[i],
cutoffs[i + 1]). The head scores the shortlist and one entry per cluster; cluster i's own classes
are scored by a tail, a low-rank projection in_features -> in_features // div_value ** (i + 1) ->
cluster size. log p(class c in cluster i) = log p_head(cluster i) + log p_tail_i(c).

forward(input, target) computes each row's log-probability of its target only: a row runs
through the tail of its target's cluster, not through all of them. Which rows those are depends
on the targets' values, so on a lazy device each cluster's selection is a sync (as nonzero is)."""

from collections import namedtuple

import loom
from loom.nn.modules.container import ModuleList, Sequential
from loom.nn.modules.linear import Linear
from loom.nn.modules.module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if (not cutoffs or cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        factory = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList(
            Sequential(Linear(in_features, int(in_features // div_value ** (i + 1)), bias=False, **factory),
                       Linear(int(in_features // div_value ** (i + 1)), self.cutoffs[i + 1] - self.cutoffs[i],
                              bias=False, **factory))
            for i in range(self.n_clusters))

    def reset_parameters(self):
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_, target_):
        """(output, loss): output[r] = log p(target[r] | input[r]), loss = -output.mean()."""
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{tuple(input_.shape)}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{tuple(input_.shape)}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)

        # Per row: the head's column to read (the target itself in the shortlist, else its
        # cluster's entry) and, for cluster rows, the tail's log-probability of the target.
        output = input.new_zeros(target.size(0))
        head_column = target.new_empty(target.size(0))
        covered = 0
        for i, (low, high) in enumerate(zip([0] + self.cutoffs[:-1], self.cutoffs)):
            in_range = (target >= low) & (target < high)
            rows = in_range.nonzero().reshape(-1)
            if rows.numel() == 0:
                continue
            covered += rows.numel()
            if i == 0:
                head_column.index_copy_(0, rows, target[in_range])
                continue
            head_column.index_fill_(0, rows, self.shortlist_size + i - 1)
            tail_logprob = loom.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
            picked = tail_logprob.gather(1, (target[in_range] - low).unsqueeze(1)).squeeze(1)
            output = output.index_copy(0, rows, picked)
        if covered != target.size(0):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{target.min().item()}, {target.max().item()}] were found. ")

        head_logprob = loom.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, head_column.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input, head_output):
        """log p(c | row) for every class c: [rows, n_classes]."""
        head_logprob = loom.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, :self.shortlist_size]]
        for i, projection in enumerate(self.tail):
            parts.append(loom.log_softmax(projection(input), dim=1)
                         + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return loom.cat(parts, dim=1)

    def log_prob(self, input):
        """Log-probabilities of every class: input [N, in_features] -> [N, n_classes]."""
        return self._full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class of each row: input [N, in_features] -> [N]. Rows whose head picks
        a shortlist class need no tail: that class beats every cluster's classes."""
        head_output = self.head(input)
        best = loom.argmax(head_output, dim=1)
        in_tail = best >= self.shortlist_size
        if not in_tail.any():
            return best
        if in_tail.all():
            return loom.argmax(self._full_log_prob(input, head_output), dim=1)
        best = best.clone()
        best[in_tail] = loom.argmax(self._full_log_prob(input[in_tail], head_output[in_tail]), dim=1)
        return best

    def extra_repr(self):
        return ""
