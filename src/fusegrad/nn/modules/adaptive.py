"""AdaptiveLogSoftmaxWithLoss: a softmax over many classes as a head (the frequent classes
and one entry per cluster) plus one smaller projection and softmax per cluster of rarer
classes."""

from collections import namedtuple

from ..._tensor import Tensor
from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Efficient softmax for large vocabularies: `cutoffs` split the classes into a
    shortlist and clusters; cluster i projects to in_features // div_value ** (i + 1)."""

    def __init__(self, in_features: int, n_classes: int, cutoffs, div_value: float = 4.0,
                 head_bias: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1 \
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            width = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, dtype=dtype),
                                        Linear(hidden, width, bias=False, dtype=dtype)))

    def reset_parameters(self) -> None:
        """Every projection re-initialised."""
        self.head.reset_parameters()
        for first, second in self.tail:
            first.reset_parameters()
            second.reset_parameters()

    def _check(self, input, target) -> None:
        if target.dim() == 1:
            if input.shape[0] != target.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {input.size()}")
        elif target.dim() == 0:
            if input.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {input.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        """(log-probability of each row's target, mean negative log-likelihood)."""
        self._check(input_, target_)
        batched = target_.dim() > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = target_ if batched else target_.unsqueeze(0)
        # Rows are sorted into the shortlist and the clusters by their target, the rows found
        # counted: a target outside every interval leaves a row uncounted. (Validating after
        # the loop rather than by the targets' min and max up front: a compiled caller then
        # stops capturing only at the first row search, as PyTorch's does.)
        output = input.new_zeros(input.shape[0])
        columns = target.new_empty(input.shape[0])
        bounds = [0, *self.cutoffs]
        found = 0
        for i in range(len(bounds) - 1):
            chosen = (target >= bounds[i]) & (target < bounds[i + 1])
            rows = chosen.nonzero().flatten()
            if rows.numel() == 0:
                continue
            if i == 0:
                columns.index_copy_(0, rows, target[chosen])
            else:
                # the cluster's entry of the head, plus the class's log-probability within it
                columns.index_fill_(0, rows, self.shortlist_size + i - 1)
                logprob = F.log_softmax(self.tail[i - 1](input.index_select(0, rows)), dim=1)
                within = (target[chosen] - bounds[i]).unsqueeze(1)
                output.index_copy_(0, rows, logprob.gather(1, within).squeeze(1))
            found += rows.numel()
        if found != input.shape[0]:
            low, high = int(target.min()), int(target.max())
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{low}, {high}] were found. ")
        head = F.log_softmax(self.head(input), dim=1)
        # every row's head entry added in place (PyTorch's order: the result's node is the
        # in-place sum's)
        output += head.gather(1, columns.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def log_prob(self, input):
        """The log-probability of every class, (N, n_classes)."""
        head = F.log_softmax(self.head(input), dim=1)
        # (written slice by slice into one result, as PyTorch's: its node is CopySlices)
        out = input.new_empty((head.shape[0], self.n_classes))
        out[:, :self.shortlist_size] = head[:, :self.shortlist_size]
        for i, module in enumerate(self.tail):
            entry = head[:, self.shortlist_size + i].unsqueeze(1)
            logprob = F.log_softmax(module(input), dim=1)
            out[:, self.cutoffs[i]:self.cutoffs[i + 1]] = logprob + entry
        return out

    def predict(self, input):
        """The most likely class of each row."""
        import fusegrad

        return fusegrad.argmax(self.log_prob(input), dim=1)


__all__ = ["AdaptiveLogSoftmaxWithLoss"]
