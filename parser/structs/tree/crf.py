"""The non-projective tree CRF: an exact distribution over dependency trees.

Conventions: ``scores[b, dep, head]`` ``[B, N+1, N+1]`` (index 0 = ROOT; ``lengths[b]`` counts
words) or labeled ``[B, N+1, N+1, L]`` (one label per arc; arc scores are the log-sum-exp over
labels). ``heads[b, dep]`` long ``[B, N+1]``, ``heads[:, 0]`` ignored, ``-1`` = unannotated.
Row 0, the diagonal and padding are ignored in ``scores`` and are exactly 0 in ``marginals``.

log Z and the marginals come from a float64 LU of the Laplacian (:mod:`.laplacian`); sentences
where that is not provably accurate are recomputed exactly by log-space elimination
(:mod:`.elimination`), per sentence, inside the same batch (the route: :mod:`.partition`). Results
are in the input dtype. Expectations and second order: :mod:`.expectations`.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor
from torch.distributions import Distribution
from torch.distributions.kl import register_kl

from parser.structs.common import (
    NEG_INF,
    as_dtype,
    cached,
    check_comparable,
    check_scores_and_lengths,
    logsumexp_safe,
    rounding_cleared,
    word_mask,
)
from parser.structs.decoding.kbest import KBestTrees, k_best_trees
from parser.structs.decoding.mst import maximum_spanning_tree
from parser.structs.projective.eisner import eisner
from parser.structs.tree import extreme
from parser.structs.tree.expectations import FeatureExpectations
from parser.structs.tree.partition import PartitionPath
from parser.structs.tree.sampling import sample_trees

__all__ = ["TreeCRF"]


def _expected(marginals: Tensor, scores: Tensor) -> Tensor:
    """``[B]`` expected tree score; ``-inf`` scores (non-arcs, marginal 0) count as 0."""
    return (marginals * torch.nan_to_num(scores, neginf=0.0)).flatten(1).sum(-1)


def _forbid(value: Tensor, marginals: Tensor, other_scores: Tensor) -> Tensor:
    """``value`` with +inf where ``marginals`` put mass on arcs that ``other_scores`` forbid."""
    forbidden = ((marginals > 0) & torch.isneginf(other_scores)).flatten(1).any(-1)
    return torch.where(forbidden, float("inf"), value)


class TreeCRF(PartitionPath, FeatureExpectations, Distribution):
    """Distribution over (single- or multi-root) non-projective trees of each sentence.

    scores: ``[B, dep, head]`` or labeled ``[B, dep, head, L]``; lengths: ``[B]`` words.
    single_root: exactly one word attached to ROOT (UD) when True.
    """

    arg_constraints: ClassVar[dict] = {}
    has_rsample = False

    def __init__(self, scores: Tensor, lengths: Tensor, *, single_root: bool = True) -> None:
        scores, self._padded, self._highest = check_scores_and_lengths(scores, lengths, labeled=True)
        self.scores = scores
        self.lengths = (lengths if lengths.dtype == torch.long and lengths.device == scores.device
                        else lengths.to(device=scores.device, dtype=torch.long))
        self.single_root = bool(single_root)
        self.labeled = scores.dim() == 4
        size = scores.shape[1]
        super().__init__(torch.Size([scores.shape[0]]), torch.Size([size]), validate_args=False)

    # ----------------------------------------------------------------- masks and scores
    @cached
    def labeled_scores(self) -> Tensor:
        """Labeled scores ``[B, dep, head, L]`` with -inf off arcs (labeled CRFs only)."""
        return torch.where(self.arc_mask[..., None], self.scores, NEG_INF)

    @cached
    def arc_scores(self) -> Tensor:
        """``[B, dep, head]`` arc scores (log-sum-exp over labels), -inf off arcs."""
        if self.labeled:
            return logsumexp_safe(self.labeled_scores, -1)
        return self._off_arcs_masked(self.scores, in_place=False)

    # ----------------------------------------------------------------- log Z and marginals
    @cached
    def marginals(self) -> Tensor:
        """Marginals with the shape of ``scores``: arc marginals, or labeled arc marginals."""
        if not self.labeled:
            return self.arc_marginals
        return self.arc_marginals[..., None] * self._label_probs

    @cached
    def _label_probs(self) -> Tensor:
        """``[B, dep, head, L]`` p(label | arc), 0 off arcs."""
        arc = self.arc_scores
        safe = torch.where(torch.isfinite(arc), arc, torch.zeros_like(arc))
        return torch.exp(self.labeled_scores - safe[..., None])

    # ----------------------------------------------------------------- trees
    def _check_heads(self, heads: Tensor, labels: Tensor | None) -> None:
        size = self.scores.shape[1]
        if heads.shape != (self.scores.shape[0], size) or heads.dtype != torch.long:
            raise ValueError(f"heads: expected long [B, N+1] = {[self.scores.shape[0], size]}, "
                             f"got {heads.dtype} {list(heads.shape)}")
        words = word_mask(self.lengths, size)
        if (heads[words] == -1).any():
            raise ValueError("heads: -1 (unannotated) on a real word; a partially annotated "
                             "sentence has no single tree: use restrict(allowed) and log_partition")
        out = words & ((heads < 0) | (heads > self.lengths[:, None]))
        if out.any():
            b, d = (int(i) for i in out.nonzero()[0])
            raise ValueError(f"heads[{b}, {d}] = {int(heads[b, d])} outside 0..{int(self.lengths[b])}")
        if labels is not None:
            if not self.labeled:
                raise ValueError("labels: given for an unlabeled TreeCRF")
            n_labels = self.scores.shape[-1]
            if labels.shape != heads.shape or labels.dtype != torch.long:
                raise ValueError(f"labels: expected long {list(heads.shape)}, got {list(labels.shape)}")
            bad = words & ((labels < 0) | (labels >= n_labels))
            if bad.any():
                b, d = (int(i) for i in bad.nonzero()[0])
                raise ValueError(f"labels[{b}, {d}] = {int(labels[b, d])} outside 0..{n_labels - 1}")

    def score(self, heads: Tensor, labels: Tensor | None = None) -> Tensor:
        """``[B]`` total score of the trees ``heads [B, N+1]`` (labels ``[B, N+1]`` if labeled;
        without labels a labeled CRF scores the unlabeled tree, summed over labels)."""
        return self._score64(heads, labels).to(self.scores.dtype)

    def _score64(self, heads: Tensor, labels: Tensor | None) -> Tensor:
        self._check_heads(heads, labels)
        words = word_mask(self.lengths, heads.shape[1])
        index = heads.clamp(min=0)
        if labels is None:
            picked = self.arc_scores.gather(2, index[:, :, None]).squeeze(2)
        else:
            rows = self.labeled_scores.gather(2, index[:, :, None, None].expand(
                -1, -1, 1, self.scores.shape[-1])).squeeze(2)
            picked = rows.gather(2, labels.clamp(min=0)[:, :, None]).squeeze(2)
        picked = picked.to(torch.float64)
        return torch.where(words, picked, torch.zeros_like(picked)).sum(-1)

    def log_prob(self, heads: Tensor, labels: Tensor | None = None) -> Tensor:
        """``[B]`` log p(heads[, labels]); -inf for a tree that is not allowed."""
        # In float64, so rounding to the input dtype cannot make a log-probability positive.
        if extreme.needs_exact(self):  # huge scores: from centred scores (:mod:`.extreme`)
            return extreme.log_prob64(self, heads, labels).to(self.scores.dtype)
        value = self._score64(heads, labels) - self._log_z64()
        return rounding_cleared(value, self._rounding, upper=True).to(self.scores.dtype)

    def argmax(self, *, projective: bool = False):
        """Maximum spanning tree ``heads [B, N+1]`` (``(heads, labels)`` when labeled); with
        ``projective`` the best projective tree instead (Eisner, :mod:`parser.structs.projective.eisner`).

        Labeled: the best label of each arc, then the tree over max-over-labels scores.
        """
        decode = eisner if projective else maximum_spanning_tree
        with torch.no_grad():
            if not self.labeled:
                return decode(self.arc_scores, self.lengths, single_root=self.single_root)
            best, labels = self.labeled_scores.max(-1)
            heads = decode(best, self.lengths, single_root=self.single_root)
            return heads, self._on_arcs(labels, heads)

    def kbest(self, k: int) -> KBestTrees:
        """The ``k`` best trees, best first, exactly: ``(heads [k, B, N+1], labels [k, B, N+1] or
        None when unlabeled, scores [k, B] float64)``; ranks beyond a sentence's number of trees
        are -1 rows with score -inf. Labeled: the k best labeled trees. Order and algorithm:
        :mod:`parser.structs.decoding.kbest`; ``log_prob(heads[r], labels[r])`` scores rank r."""
        scores = self.labeled_scores if self.labeled else self.arc_scores
        return k_best_trees(scores, self.lengths, k=k, single_root=self.single_root)

    def arc_labels(self, heads: Tensor) -> Tensor:
        """``[B, N+1]`` each word's best label on its arc in ``heads`` (labeled CRFs; 0 off words)."""
        with torch.no_grad():
            return self._on_arcs(self.labeled_scores.argmax(-1), heads)

    def _on_arcs(self, labels: Tensor, heads: Tensor) -> Tensor:
        """``labels [B, dep, head]`` read at each word's head; 0 off words."""
        picked = labels.gather(2, heads.clamp(min=0)[:, :, None]).squeeze(2)
        return picked.masked_fill(~word_mask(self.lengths, heads.shape[1]), 0)

    def sample(self, n: int | torch.Size = 1, *, generator: torch.Generator | None = None):
        """``n`` exact samples ``[n, B, N+1]`` (``(heads, labels)`` when labeled)."""
        if isinstance(n, torch.Size):
            if len(n) > 1:
                raise ValueError(f"sample: sample_shape must have one dimension, got {tuple(n)}")
            n = n[0] if len(n) else 1
        if int(n) < 1:
            raise ValueError(f"sample: n = {n}, expected >= 1")
        with torch.no_grad():
            heads = sample_trees(self.arc_scores, self.lengths, single_root=self.single_root,
                                 n=int(n), generator=generator)
            if not self.labeled:
                return heads
            probs = self._label_probs.detach()[None].expand(int(n), *self._label_probs.shape)
            rows = probs.gather(3, heads[..., None, None].expand(-1, -1, -1, 1, probs.shape[-1]))
            rows = rows.squeeze(3).clone()
            rows[:, :, 0] = 1.0  # ROOT and padding rows get a dummy label 0
            rows = rows.masked_fill(~word_mask(self.lengths, heads.shape[2])[None, :, :, None]
                                    & (rows.sum(-1, keepdim=True) <= 0), 1.0)
            flat = rows.reshape(-1, rows.shape[-1])
            labels = torch.multinomial(flat, 1, generator=generator).reshape(heads.shape)
            return heads, labels.masked_fill(~word_mask(self.lengths, heads.shape[2])[None], 0)

    def restrict(self, allowed: Tensor) -> TreeCRF:
        """The distribution conditioned on arcs in ``allowed [B, dep, head]`` (bool)."""
        if allowed.dtype != torch.bool or allowed.shape != self.scores.shape[:3]:
            raise ValueError(f"allowed: expected bool {list(self.scores.shape[:3])}, "
                             f"got {allowed.dtype} {list(allowed.shape)}")
        mask = allowed[..., None] if self.labeled else allowed
        return TreeCRF(self.scores.masked_fill(~mask, NEG_INF), self.lengths, single_root=self.single_root)

    # ----------------------------------------------------------------- expectations
    def _weighted(self) -> tuple[Tensor, Tensor]:
        """``(marginals, masked scores)`` with the shape of ``scores``, float64 (a float32 sum of
        labeled terms loses ~1e-7 of E[score] per nat of score)."""
        if self.labeled:
            return as_dtype(self.marginals, torch.float64), self._masked_scores
        return self._partition[1], self._scores64

    @property
    def _masked_scores(self) -> Tensor:
        """The masked scores of :meth:`_weighted`, without the marginals."""
        return as_dtype(self.labeled_scores, torch.float64) if self.labeled else self._scores64

    @cached
    def _rounding(self) -> Tensor:
        """``[B]`` float64: how far rounding can move log Z, a tree's score or E[score] (and so a
        log-probability, the entropy, a KL): the trust test's tolerance and a few ulps of the
        N + 1 float64 sums, relative to the sum of the arc scores' magnitudes."""
        size = torch.nan_to_num(self._masked_scores.detach().abs().to(torch.float64), posinf=0.0)
        words = self.scores.shape[1]
        return (self._tolerance + 16 * words * torch.finfo(torch.float64).eps) * size.flatten(1).sum(-1)

    def entropy(self) -> Tensor:
        """``[B]`` Shannon entropy (over labeled trees when labeled), O(N^3)."""
        if extreme.needs_exact(self):  # huge scores: log Z - E[score] would cancel (:mod:`.extreme`)
            return extreme.entropy(self)
        if not self.labeled and not self._has_graph:
            factors = self._factors
            if factors.all_trusted:  # the trust test computed it
                return as_dtype(rounding_cleared(factors.entropy, self._rounding), self.scores.dtype)
        marginals, scores = self._weighted()
        value = self._partition[0] - _expected(marginals, scores)
        return as_dtype(rounding_cleared(value, self._rounding), self.scores.dtype)

    def cross_entropy(self, other: TreeCRF) -> Tensor:
        """``[B]`` -E_self[log other(tree)]; inf where self puts mass on trees other forbids."""
        self._check_other(other)
        if extreme.needs_exact(self) or extreme.needs_exact(other):
            return extreme.cross_entropy(self, other, _forbid)
        marginals, _ = self._weighted()
        other_scores = other._masked_scores
        value = other._log_z64() - _expected(marginals, other_scores)
        value = rounding_cleared(value, other._rounding)
        return _forbid(value, marginals, other_scores).to(self.scores.dtype)

    def kl(self, other: TreeCRF) -> Tensor:
        """``[B]`` KL(self || other) = sum mu (s - s') - log Z + log Z', O(N^3)."""
        self._check_other(other)
        if extreme.needs_exact(self) or extreme.needs_exact(other):
            return extreme.kl(self, other, _forbid)
        marginals, scores = self._weighted()
        other_scores = other._masked_scores
        gap = torch.nan_to_num(scores, neginf=0.0) - torch.nan_to_num(other_scores, neginf=0.0)
        value = other._log_z64() - self._partition[0] + (marginals * gap).flatten(1).sum(-1)
        value = rounding_cleared(value, self._rounding + other._rounding)
        return _forbid(value, marginals, other_scores).to(self.scores.dtype)

    def _check_other(self, other: TreeCRF) -> None:
        check_comparable(self, other, TreeCRF)

    def renyi_entropy(self, alpha: float) -> Tensor:
        """``[B]`` Renyi entropy (log Z(alpha s) - alpha log Z(s)) / (1 - alpha); alpha > 0."""
        alpha = float(alpha)
        if not alpha > 0:
            raise ValueError(f"alpha = {alpha}: Renyi entropy needs alpha > 0")
        if alpha == 1.0:
            return self.entropy()
        scaled = TreeCRF(alpha * self.scores.masked_fill(~self._full_mask, NEG_INF), self.lengths,
                         single_root=self.single_root)
        return (scaled.log_partition - alpha * self.log_partition) / (1.0 - alpha)

    @property
    def _full_mask(self) -> Tensor:
        return self.arc_mask[..., None] if self.labeled else self.arc_mask


@register_kl(TreeCRF, TreeCRF)
def _kl_tree_crf(p: TreeCRF, q: TreeCRF) -> Tensor:
    return p.kl(q)
