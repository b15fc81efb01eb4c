"""The projective tree CRF: the distribution over projective dependency trees, by Eisner's (1996)
inside algorithm in log space (first order, O(N^3), batched over sentences and spans).

The alternative to :class:`parser.structs.TreeCRF` (matrix-tree theorem, non-projective) for a
model that should put no mass on crossing arcs: 99% of UD arcs are projective, and a model trained
without trees puts 14% of its best tree's arcs into crossings when it may. (Measured: training the
GE model under this CRF instead of the matrix-tree one did not beat the matrix-tree model decoded
projectively, experiments/results/ge_alone_clauses.md.) Same conventions: ``scores[b, dep, head]``
``[B, N+1, N+1]`` (index 0 = ROOT), ``lengths[b]`` words; unlabeled only.

log Z comes from the inside chart; the marginals are its gradient (with ``create_graph`` when the
scores carry a graph, so that expectations such as GE's are differentiable once more, the
"first-order expectation semiring by autograd" of Eisner 2016 and Zmigrod et al. 2021). Chart
entries ``[b, start, width]`` are kept in lists per width, so every step is out of place and
autograd sees each entry once. Single root: ROOT stays out of the chart and picks the root word
``r`` last (``[1, r]`` headed by ``r`` on its left, ``[r, n]`` on its right), as in
:func:`parser.structs.projective.eisner.eisner`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.common import (
    arc_mask,
    cached,
    check_comparable,
    check_scores_and_lengths,
    logsumexp_safe,
    rounding_cleared,
    sparse_expectation,
)
from parser.structs.projective.eisner import RIGHT, chart, chart_arcs, eisner, root_totals

__all__ = ["ProjectiveTreeCRF", "is_projective"]

NEG_INF = float("-inf")


class ProjectiveTreeCRF:
    """Distribution over projective trees of each sentence of a batch (unlabeled arcs)."""

    labeled = False

    def __init__(self, scores: Tensor, lengths: Tensor, *, single_root: bool = True) -> None:
        if scores.dim() != 3:
            raise ValueError(f"ProjectiveTreeCRF: scores must be [B, N+1, N+1] (unlabeled), got {list(scores.shape)}")
        scores, _, _ = check_scores_and_lengths(scores, lengths)
        self.scores = scores
        self.lengths = lengths.to(device=scores.device, dtype=torch.long)
        self.single_root = bool(single_root)

    @cached
    def arc_mask(self) -> Tensor:
        """``[B, dep, head]`` bool: real arcs."""
        return arc_mask(self.lengths, self.scores.shape[1])

    def restrict(self, allowed: Tensor) -> ProjectiveTreeCRF:
        """The distribution conditioned on arcs in ``allowed [B, dep, head]`` (bool)."""
        if allowed.dtype != torch.bool or allowed.shape != self.scores.shape:
            raise ValueError(f"allowed: expected bool {list(self.scores.shape)}, "
                             f"got {allowed.dtype} {list(allowed.shape)}")
        return ProjectiveTreeCRF(self.scores.masked_fill(~allowed, NEG_INF), self.lengths,
                                 single_root=self.single_root)

    @cached
    def arc_scores(self) -> Tensor:
        """``[B, dep, head]`` scores, -inf off arcs."""
        return self.scores.masked_fill(~self.arc_mask, NEG_INF)

    @cached
    def _inside(self) -> tuple[Tensor, Tensor]:
        """``(log Z [B] float64, the float64 arc scores it is a function of)``."""
        # The marginals are a gradient: without a graph, autograd gets a leaf of its own (made
        # outside inference mode, which autograd cannot record).
        with torch.inference_mode(False), torch.enable_grad():
            scores64 = self.arc_scores.to(torch.float64)
            if not scores64.requires_grad:
                scores64 = scores64.clone().requires_grad_()
            return inside(scores64, self.lengths, single_root=self.single_root), scores64

    @property
    def log_partition(self) -> Tensor:
        """``[B]`` log Z (-inf where no projective tree has a finite score)."""
        log_z, _ = self._inside
        return (log_z if self.scores.requires_grad else log_z.detach()).to(self.scores.dtype)

    @cached
    def _marginals64(self) -> Tensor:
        log_z, scores64 = self._inside
        graph = self.scores.requires_grad and torch.is_grad_enabled()
        finite = torch.isfinite(log_z)
        with torch.inference_mode(False), torch.enable_grad():
            (grad,) = torch.autograd.grad(log_z.masked_fill(~finite, 0.0).sum(), scores64, create_graph=graph)
        grad = torch.where(self.arc_mask & finite[:, None, None], grad, torch.zeros_like(grad))
        # Exact marginals lie in [0, 1]; the chart's backward leaves rounding-sized excursions.
        grad = grad - (grad - grad.clamp(0.0, 1.0)).detach()
        return grad if graph else grad.detach()

    @property
    def arc_marginals(self) -> Tensor:
        """``[B, dep, head]`` p(head(dep) = head) over projective trees; 0 off arcs."""
        return self._marginals64.to(self.scores.dtype)

    @property
    def marginals(self) -> Tensor:
        return self.arc_marginals

    def expect_sparse(self, arc_index: Tensor, feature_ids: Tensor, values: Tensor, n_features: int) -> Tensor:
        """E[features] ``[B, n_features]`` from sparse ``(b, dep, head)`` rows (as ``TreeCRF``)."""
        return sparse_expectation(self.arc_marginals, arc_index, feature_ids, values, n_features)

    @cached
    def _rounding(self) -> Tensor:
        """``[B]`` float64: how far rounding can move log Z, a tree's score or E[score]: a few ulps
        of the chart's N + 1 float64 sums, relative to the sum of the arc scores' magnitudes."""
        size = torch.nan_to_num(self.arc_scores.detach().abs().to(torch.float64), posinf=0.0)
        return 16 * self.scores.shape[1] * torch.finfo(torch.float64).eps * size.flatten(1).sum(-1)

    def _log_z64(self) -> Tensor:
        log_z, _ = self._inside
        return log_z if self.scores.requires_grad else log_z.detach()

    def entropy(self) -> Tensor:
        """``[B]`` Shannon entropy ``log Z - E[score]`` (nats), formed in float64."""
        real = self.arc_mask & torch.isfinite(self.scores)  # a forbidden arc has marginal 0
        scores64 = self.scores.to(torch.float64)
        masked = torch.where(real, scores64, torch.zeros_like(scores64))
        expected = (self._marginals64 * masked).sum((1, 2))
        return rounding_cleared(self._log_z64() - expected, self._rounding).to(self.scores.dtype)

    def kl(self, other: ProjectiveTreeCRF) -> Tensor:
        """``[B]`` KL(self || other) = sum mu (s - s') - log Z + log Z' over projective trees (arc
        factored, so the first-order marginals suffice, as for ``TreeCRF.kl``), formed in float64;
        inf where self puts mass on an arc other forbids. Self-training's soft KL term on a
        ``model.crf=projective`` model with a teacher of the same kind."""
        check_comparable(self, other, ProjectiveTreeCRF)
        mine, theirs = self.scores.to(torch.float64), other.scores.to(torch.float64)
        real = self.arc_mask & torch.isfinite(mine)  # an arc self forbids has marginal 0
        both = real & torch.isfinite(theirs)
        gap = torch.where(both, mine, torch.zeros_like(mine)) - torch.where(both, theirs, torch.zeros_like(theirs))
        marginals = self._marginals64
        value = other._log_z64() - self._log_z64() + (marginals * gap).sum((1, 2))
        value = rounding_cleared(value, self._rounding + other._rounding)
        lost = ((marginals > 0) & real & ~both).flatten(1).any(-1)  # mass where other has none
        return torch.where(lost, torch.full_like(value, float("inf")), value).to(self.scores.dtype)

    def score(self, heads: Tensor) -> Tensor:
        """``[B]`` summed arc scores of ``heads [B, N+1]`` (words only)."""
        return self._score64(heads).to(self.scores.dtype)

    def _score64(self, heads: Tensor) -> Tensor:
        words = self.arc_mask.any(-1)
        picked = self.scores.gather(2, heads.clamp(min=0)[..., None]).squeeze(2).to(torch.float64)
        return torch.where(words, picked, torch.zeros_like(picked)).sum(1)

    def log_prob(self, heads: Tensor, labels: Tensor | None = None) -> Tensor:
        """``[B]`` log p(heads); -inf for a tree that is not projective (or not single-rooted
        when ``single_root``). Formed in float64, so rounding cannot make it positive.
        ``labels`` is :meth:`TreeCRF.log_prob`'s argument; this distribution has unlabeled arcs
        only, so it must be None."""
        if labels is not None:
            raise ValueError("ProjectiveTreeCRF models unlabeled arcs: log_prob takes no labels")
        value = self._score64(heads) - self._log_z64()
        value = rounding_cleared(value, self._rounding, upper=True).to(self.scores.dtype)
        allowed = is_projective(heads, self.lengths)
        if self.single_root:
            words = self.arc_mask.any(-1)
            allowed = allowed & (((heads == 0) & words).sum(1) == 1)
        return torch.where(allowed, value, torch.full_like(value, NEG_INF))

    def argmax(self, *, projective: bool = True) -> Tensor:
        """The best projective tree (Eisner); every tree of this distribution is projective, so
        ``projective=False`` asks for nothing else."""
        with torch.no_grad():
            return eisner(self.arc_scores, self.lengths, single_root=self.single_root)


def inside(arc_scores: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor:
    """``[B]`` log Z over projective trees of ``arc_scores [B, dep, head]`` (-inf off arcs): Eisner's
    chart (:func:`parser.structs.projective.eisner.chart`) in the log semiring."""
    complete, _ = chart(chart_arcs(arc_scores, single_root=single_root), _logsumexp)
    if not single_root:
        return complete[torch.arange(arc_scores.shape[0], device=arc_scores.device), 0, lengths, RIGHT]
    totals = root_totals(complete, arc_scores, lengths)
    return logsumexp_safe(totals, -1)


def _logsumexp(values: Tensor) -> tuple[Tensor, None]:
    return logsumexp_safe(values, -1), None


def is_projective(heads: Tensor, lengths: Tensor) -> Tensor:
    """``[B]`` bool: no two arcs of the tree cross (ROOT at position 0; arcs as spans)."""
    size = heads.shape[1]
    positions = torch.arange(size, device=heads.device)
    words = (positions[None, :] >= 1) & (positions[None, :] <= lengths[:, None])
    low = torch.minimum(positions[None, :], heads)
    high = torch.maximum(positions[None, :], heads)
    # Arc a = (low_a, high_a) and arc b cross when low_a < low_b < high_a < high_b.
    crossing = ((low[:, :, None] < low[:, None, :]) & (low[:, None, :] < high[:, :, None])
                & (high[:, :, None] < high[:, None, :]))
    crossing &= words[:, :, None] & words[:, None, :]
    return ~crossing.flatten(1).any(1)
