"""The non-projective tree CRF: an exact distribution over dependency trees.

Conventions: ``scores[b, dep, head]`` ``[B, N+1, N+1]`` (index 0 = ROOT; ``lengths[b]`` counts
words) or labeled ``[B, N+1, N+1, L]`` (one label per arc; arc scores are the log-sum-exp over
labels). ``heads[b, dep]`` long ``[B, N+1]``, ``heads[:, 0]`` ignored, ``-1`` = unannotated.
Row 0, the diagonal and padding are ignored in ``scores`` and are exactly 0 in ``marginals``.

log Z and the marginals come from a float64 LU of the Laplacian (:mod:`.laplacian`); sentences
where that is not provably accurate are recomputed exactly by log-space elimination
(:mod:`.log_elimination`), per sentence, inside the same batch. Results are in the input dtype.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor
from torch.distributions import Distribution
from torch.distributions.kl import register_kl

from parser.structs import laplacian, lu_second_order
from parser.structs.laplacian import (
    Factorization,
    LaplacianFactors,
    arc_mask,
    matrix_tree,
    word_mask,
)
from parser.structs.log_elimination import (
    arc_pair_marginals_by_elimination,
    covariance_by_elimination,
    log_partition_by_elimination,
    logsumexp_safe,
    pairwise_marginals_by_elimination,
)
from parser.structs.one_sentence import one_sentence_factors

__all__ = ["TreeCRF"]

NEG_INF = float("-inf")


class _cached:
    """``functools.cached_property`` without its lock: Python 3.11 takes one on every first
    access, a per-call cost for these one-shot objects. Not thread-safe (nor are tensors)."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


def _check_scores(scores: Tensor, lengths: Tensor) -> tuple[bool, float]:
    """Raises ValueError on bad input; returns whether any sentence is shorter than N (padded)
    and the largest score (padding and off arcs included)."""
    if not isinstance(scores, Tensor) or not scores.is_floating_point():
        raise ValueError(f"scores: expected a float tensor, got {getattr(scores, 'dtype', scores)}")
    if scores.dim() not in (3, 4) or scores.shape[1] != scores.shape[2] or scores.shape[1] < 2:
        raise ValueError(
            f"scores: expected [B, N+1, N+1] or [B, N+1, N+1, L] with N >= 1, got {tuple(scores.shape)}"
        )
    if not isinstance(lengths, Tensor) or lengths.dim() != 1 or lengths.dtype.is_floating_point:
        raise ValueError(f"lengths: expected an integer [B] tensor, got {lengths!r}")
    if lengths.shape[0] != scores.shape[0]:
        raise ValueError(f"lengths: {lengths.shape[0]} sentences, scores has {scores.shape[0]}")
    size = scores.shape[1]
    low = size - 1
    if lengths.numel():
        values = lengths.tolist()  # one sync, then plain Python (cheaper than aminmax + 2 items)
        low, high = min(values), max(values)
        if low < 1 or high > size - 1:
            bad = int(((lengths < 1) | (lengths > size - 1)).nonzero()[0, 0])
            raise ValueError(
                f"lengths[{bad}] = {int(lengths[bad])} outside 1..N = 1..{size - 1} (scores {tuple(scores.shape)})"
            )
    # The maximum is NaN or +inf exactly when a score is.
    highest = _extreme(scores, "max")
    if not highest < float("inf"):
        where = tuple(int(i) for i in (torch.isnan(scores) | torch.isposinf(scores)).nonzero()[0])
        raise ValueError(f"scores{list(where)} = {scores[where].item()}: NaN or +inf score")
    return low < size - 1, highest


def _numpy_ready(scores: Tensor) -> bool:
    """CPU float32/float64: ``scores.numpy()`` is a free view (one-sentence path, input check)."""
    return scores.device.type == "cpu" and scores.dtype in (torch.float32, torch.float64)


def _extreme(scores: Tensor, which: str) -> float:
    """The largest (``which="max"``) or smallest (``"min"``) score (NaN if one is; 0 without
    scores), by numpy where it can view the tensor: in a one-sentence call a torch op costs
    several times its isolated time."""
    if not scores.numel():
        return 0.0
    scores = scores.detach() if scores.requires_grad else scores
    if _numpy_ready(scores):
        return float(getattr(scores.numpy(), which)())
    return float(getattr(torch, "a" + which)(scores))


def _as(tensor: Tensor, dtype: torch.dtype) -> Tensor:
    """``tensor.to(dtype)`` without the call when it already has it (per-call overhead)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def _expected(marginals: Tensor, scores: Tensor) -> Tensor:
    """``[B]`` expected tree score; ``-inf`` scores (non-arcs, marginal 0) count as 0."""
    return (marginals * torch.nan_to_num(scores, neginf=0.0)).flatten(1).sum(-1)


def _forbid(value: Tensor, marginals: Tensor, other_scores: Tensor) -> Tensor:
    """``value`` with +inf where ``marginals`` put mass on arcs that ``other_scores`` forbid."""
    forbidden = ((marginals > 0) & torch.isneginf(other_scores)).flatten(1).any(-1)
    return torch.where(forbidden, float("inf"), value)


class TreeCRF(Distribution):
    """Distribution over (single- or multi-root) non-projective trees of each sentence.

    scores: ``[B, dep, head]`` or labeled ``[B, dep, head, L]``; lengths: ``[B]`` words.
    single_root: exactly one word attached to ROOT (UD) when True.
    """

    arg_constraints: ClassVar[dict] = {}
    has_rsample = False

    def __init__(self, scores: Tensor, lengths: Tensor, *, single_root: bool = True) -> None:
        self._padded, self._highest = _check_scores(scores, lengths)
        self.scores = scores
        self.lengths = (lengths if lengths.dtype == torch.long and lengths.device == scores.device
                        else lengths.to(device=scores.device, dtype=torch.long))
        self.single_root = bool(single_root)
        self.labeled = scores.dim() == 4
        size = scores.shape[1]
        super().__init__(torch.Size([scores.shape[0]]), torch.Size([size]), validate_args=False)

    # ----------------------------------------------------------------- masks and scores
    @_cached
    def arc_mask(self) -> Tensor:
        """``[B, dep, head]`` bool: real arcs (word dep; ROOT or other word head)."""
        return arc_mask(self.lengths, self.scores.shape[1], padded=self._padded)

    @_cached
    def labeled_scores(self) -> Tensor:
        """Labeled scores ``[B, dep, head, L]`` with -inf off arcs (labeled CRFs only)."""
        return torch.where(self.arc_mask[..., None], self.scores, NEG_INF)

    @_cached
    def arc_scores(self) -> Tensor:
        """``[B, dep, head]`` arc scores (log-sum-exp over labels), -inf off arcs."""
        if self.labeled:
            return logsumexp_safe(self.labeled_scores, -1)
        return self._off_arcs_masked(self.scores, in_place=False)

    def _off_arcs_masked(self, scores: Tensor, *, in_place: bool) -> Tensor:
        """``scores [B, dep, head]`` with -inf off arcs: unpadded, row 0 and the diagonal filled
        in place, or one add of a cached 0 / -inf mask (scores have no +inf); else a masked fill."""
        size = scores.shape[1]
        if not self._padded and in_place:  # row 0 and the diagonal: two small fills
            scores.select(1, 0).fill_(NEG_INF)
            scores.diagonal(dim1=1, dim2=2).fill_(NEG_INF)
            return scores
        if not self._padded:
            return scores + laplacian.off_arc_penalty(size, scores.dtype, scores.device)
        mask = laplacian.off_arc_mask(self.lengths, size)
        return scores.masked_fill_(mask, NEG_INF) if in_place else scores.masked_fill(mask, NEG_INF)

    # ----------------------------------------------------------------- log Z and marginals
    @_cached
    def _scores64(self) -> Tensor:
        """``arc_scores`` in float64."""
        if (self.scores.dtype == torch.float64 or self.labeled or self._has_graph
                or "arc_scores" in self.__dict__):
            return _as(self.arc_scores, torch.float64)
        # Lower-precision input: convert, then mask the copy in place (a pass fewer than masking
        # the input first; arc_scores in the input dtype is only built if asked for).
        return self._off_arcs_masked(self.scores.to(torch.float64), in_place=True)

    @property
    def _has_graph(self) -> bool:
        return torch.is_grad_enabled() and self.scores.requires_grad

    @property
    def _tolerance(self) -> float:
        return laplacian.TOLERANCE.get(self.scores.dtype, laplacian.DEFAULT_TOLERANCE)

    @_cached
    def _lu(self) -> Factorization:
        # Every gap between two arc scores of a word is at most the scores' range (labels: plus
        # log L, the most a log-sum-exp over labels adds): within MAX_GAP, no gap to compute.
        span = self._highest - _extreme(self.scores, "min")
        if self.labeled:
            span += math.log(self.scores.shape[-1])
        return Factorization(self._scores64, self.lengths, single_root=self.single_root, padded=self._padded,
                             span=span)

    @_cached
    def _certified_log_z(self) -> Tensor:
        """``[B]`` float64 log Z without the inverse where the LU's factors prove it exact; the
        other sentences (a sub-batch) take the marginals' test and, if need be, elimination."""
        lu = self._lu
        certified = lu.log_z_certified(self._tolerance)
        if bool(certified.all()):
            return lu.log_z
        rest = (~certified).nonzero().squeeze(1)
        sub = TreeCRF(self._scores64[rest], self.lengths[rest], single_root=self.single_root)
        return lu.log_z.index_copy(0, rest, sub._partition[0])

    @_cached
    def _factors(self) -> LaplacianFactors:
        scores = self.scores
        if scores.shape[0] == 1 and not self._padded and _numpy_ready(scores) and not self._has_graph:
            # One sentence, no graph: the same fast path with numpy's cheaper per-op cost.
            arcs = self._scores64 if self.labeled else scores  # (unmasked is fine here)
            *parts, trusted, expected = one_sentence_factors(arcs, single_root=self.single_root,
                                                             tol=self._tolerance)
            return LaplacianFactors(*parts, trusted, expected, single_root=self.single_root)
        return matrix_tree(self._scores64, self.lengths, single_root=self.single_root,
                           tolerance=self._tolerance, padded=self._padded, factorization=self._lu)

    @_cached
    def _partition(self) -> tuple[Tensor, Tensor]:
        """``(log Z [B], arc marginals [B, dep, head])`` in float64, robust path merged in."""
        factors = self._factors
        log_z, marginals = factors.log_z, factors.marginals
        if factors.all_trusted:
            return log_z, marginals
        bad = (~factors.trusted).nonzero().squeeze(1)
        if bad.numel():
            scores64 = self._scores64
            graph = torch.is_grad_enabled() and scores64.requires_grad
            if graph:  # LU's graph on a near-singular Laplacian backpropagates 0 * inf = NaN
                log_z, marginals = self._calm_factors.log_z, self._calm_factors.marginals
            # (inference_mode(False): autograd cannot record inference tensors)
            with torch.inference_mode(False), torch.enable_grad():
                sub = scores64[bad] if graph else scores64[bad].clone().requires_grad_()
                sub_z = log_partition_by_elimination(sub, self.lengths[bad], single_root=self.single_root)
                (sub_mu,) = torch.autograd.grad(sub_z.sum(), sub, create_graph=graph)
            if not graph:
                sub_z, sub_mu = sub_z.detach(), sub_mu.detach()
            finite = torch.isfinite(sub_z)[:, None, None] & self.arc_mask[bad]
            sub_mu = torch.where(finite, sub_mu, torch.zeros_like(sub_mu))
            log_z = log_z.index_copy(0, bad, sub_z)
            marginals = marginals.index_copy(0, bad, sub_mu)
        return log_z, marginals

    @_cached
    def _calm_factors(self) -> LaplacianFactors:
        """The fast path with untrusted sentences' scores set to 0 when there is a graph (their
        values are replaced by the exact path; this keeps NaN out of the LU's backward)."""
        factors = self._factors
        scores64 = self._scores64
        if factors.all_trusted or not (torch.is_grad_enabled() and scores64.requires_grad):
            return factors
        calm = torch.zeros_like(scores64).masked_fill(~self.arc_mask, NEG_INF)
        kept = torch.where(factors.trusted[:, None, None], scores64, calm)
        return matrix_tree(kept, self.lengths, single_root=self.single_root, tolerance=self._tolerance)

    @_cached
    def _untrusted(self) -> Tensor:
        """``[K]`` indices of the sentences computed by the exact (elimination) path."""
        return (~self._factors.trusted).nonzero().squeeze(1)

    @property
    def log_partition(self) -> Tensor:
        """``[B]`` log Z (over labeled trees when labeled); -inf when no tree is allowed."""
        if not self._has_graph and "_factors" not in self.__dict__:
            return _as(self._certified_log_z, self.scores.dtype)
        factors = self._factors
        if factors.all_trusted:  # no marginals needed
            return _as(factors.log_z, self.scores.dtype)
        return _as(self._partition[0], self.scores.dtype)

    @_cached
    def arc_marginals(self) -> Tensor:
        """``[B, dep, head]`` p(head(dep) = head); exactly 0 on padding, row 0 and diagonal."""
        if self.scores.dtype != torch.float64 and "_partition" not in self.__dict__ and not self._has_graph:
            factors = self._factors
            if factors.all_trusted:  # ROOT's zero row and the input dtype in one pass
                rows = factors.marginal_rows
                out = rows.new_empty(rows.shape[0], rows.shape[2], rows.shape[2], dtype=self.scores.dtype)
                out.select(1, 0).zero_()
                out.narrow(1, 1, rows.shape[1]).copy_(rows)
                return out
        return _as(self._partition[1], self.scores.dtype)

    @_cached
    def marginals(self) -> Tensor:
        """Marginals with the shape of ``scores``: arc marginals, or labeled arc marginals."""
        if not self.labeled:
            return self.arc_marginals
        return self.arc_marginals[..., None] * self._label_probs

    @_cached
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
        return (self._score64(heads, labels) - self._partition[0]).to(self.scores.dtype)

    def argmax(self, *, projective: bool = False):
        """Maximum spanning tree ``heads [B, N+1]`` (``(heads, labels)`` when labeled); with
        ``projective`` the best projective tree instead (Eisner, :mod:`parser.structs.projective`).

        Labeled: the best label of each arc, then the tree over max-over-labels scores.
        """
        from parser.structs.mst import maximum_spanning_tree
        from parser.structs.projective import eisner

        decode = eisner if projective else maximum_spanning_tree
        with torch.no_grad():
            if not self.labeled:
                return decode(self.arc_scores, self.lengths, single_root=self.single_root)
            best, labels = self.labeled_scores.max(-1)
            heads = decode(best, self.lengths, single_root=self.single_root)
            return heads, self._on_arcs(labels, heads)

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
        from parser.structs.sampling import sample_trees

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
        """``(marginals, masked scores)`` with the shape of ``scores`` (float64 when unlabeled)."""
        if self.labeled:
            return self.marginals, self.labeled_scores
        return self._partition[1], self._scores64

    def entropy(self) -> Tensor:
        """``[B]`` Shannon entropy (over labeled trees when labeled), O(N^3)."""
        if not self.labeled and not self._has_graph:
            factors = self._factors
            if factors.all_trusted:
                return _as(factors.entropy, self.scores.dtype)  # the trust test computed it
        marginals, scores = self._weighted()
        return _as(self._partition[0] - _expected(marginals, scores), self.scores.dtype)

    def cross_entropy(self, other: TreeCRF) -> Tensor:
        """``[B]`` -E_self[log other(tree)]; inf where self puts mass on trees other forbids."""
        self._check_other(other)
        marginals, _ = self._weighted()
        _, other_scores = other._weighted()
        value = other._partition[0] - _expected(marginals, other_scores)
        return _forbid(value, marginals, other_scores).to(self.scores.dtype)

    def kl(self, other: TreeCRF) -> Tensor:
        """``[B]`` KL(self || other) = sum mu (s - s') - log Z + log Z', O(N^3)."""
        self._check_other(other)
        marginals, scores = self._weighted()
        _, other_scores = other._weighted()
        gap = torch.nan_to_num(scores, neginf=0.0) - torch.nan_to_num(other_scores, neginf=0.0)
        value = other._partition[0] - self._partition[0] + (marginals * gap).flatten(1).sum(-1)
        return _forbid(value, marginals, other_scores).to(self.scores.dtype)

    def _check_other(self, other: TreeCRF) -> None:
        if not isinstance(other, TreeCRF):
            raise ValueError(f"other: expected a TreeCRF, got {type(other).__name__}")  # noqa: TRY004
        if (other.scores.shape != self.scores.shape or other.single_root != self.single_root
                or not torch.equal(other.lengths, self.lengths)):
            raise ValueError(f"other: scores {list(other.scores.shape)} single_root={other.single_root} "
                             f"do not match {list(self.scores.shape)} single_root={self.single_root} "
                             "(or lengths differ)")

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

    def expect(self, features: Tensor) -> Tensor:
        """E[sum of arc features] ``[B, F]`` for ``features [B, dep, head, F]`` (labeled CRFs
        also take ``[B, dep, head, L, F]``). Features must be finite."""
        arc_shape = tuple(self.scores.shape[:3])
        if features.dim() == 4 and tuple(features.shape[:3]) == arc_shape:
            return torch.einsum("bdhf,bdh->bf", features, self.arc_marginals.to(features.dtype))
        if self.labeled and features.dim() == 5 and features.shape[:4] == self.scores.shape:
            return torch.einsum("bdhlf,bdhl->bf", features, self.marginals.to(features.dtype))
        raise ValueError(f"features: expected [B, N+1, N+1, F] with [B, N+1, N+1] = {list(arc_shape)}"
                         f"{' (or [B, N+1, N+1, L, F])' if self.labeled else ''}, got {list(features.shape)}")

    def expect_sparse(self, arc_index: Tensor, feature_ids: Tensor, values: Tensor,
                      n_features: int) -> Tensor:
        """E[features] ``[B, n_features]`` from K sparse entries: ``arc_index [K, 3]`` rows
        (b, dep, head) (``[K, 4]`` with label for labeled marginals), ``feature_ids [K]`` long,
        ``values [K]`` float. Entries on non-arcs contribute 0; duplicates add up."""
        self._check_sparse(arc_index, feature_ids, values, n_features)
        source = self.arc_marginals if arc_index.shape[1] == 3 else self.marginals
        return sparse_expectation(source, arc_index, feature_ids, values, n_features)

    def _check_sparse(self, arc_index, feature_ids, values, n_features) -> None:
        width = 4 if self.labeled else 3
        if arc_index.dim() != 2 or arc_index.shape[1] not in (3, width) or arc_index.dtype != torch.long:
            raise ValueError(f"arc_index: expected long [K, 3]{' or [K, 4]' if self.labeled else ''}, "
                             f"got {arc_index.dtype} {list(arc_index.shape)}")
        k = arc_index.shape[0]
        if feature_ids.shape != (k,) or values.shape != (k,) or feature_ids.dtype != torch.long:
            raise ValueError(f"feature_ids/values: expected long [K] and float [K], K = {k}, got "
                             f"{list(feature_ids.shape)} and {list(values.shape)}")
        limits = torch.tensor(self.scores.shape[: arc_index.shape[1]], device=arc_index.device)
        bad = ((arc_index < 0) | (arc_index >= limits)).any(1)
        if bad.any():
            row = int(bad.nonzero()[0, 0])
            raise ValueError(f"arc_index[{row}] = {arc_index[row].tolist()} outside {limits.tolist()}")
        wrong = (feature_ids < 0) | (feature_ids >= n_features)
        if wrong.any():
            row = int(wrong.nonzero()[0, 0])
            raise ValueError(f"feature_ids[{row}] = {int(feature_ids[row])} outside 0..{n_features - 1}")

    def covariance(self, first: Tensor, second: Tensor) -> Tensor:
        """``Cov [B, R, S]`` of arc features ``first [B, dep, head, R]``, ``second [.., S]``.

        Second order from the inverse Laplacian (float64 LU), O(N^3 (R + S) + N^2 R S); sentences
        the trust test sends to the exact path use its Hessian instead, O(N^3 min(R, S)).
        """
        for name, feats in (("first", first), ("second", second)):
            if feats.dim() != 4 or tuple(feats.shape[:3]) != tuple(self.scores.shape[:3]):
                raise ValueError(f"{name}: expected [B, N+1, N+1, F] with [B, N+1, N+1] = "
                                 f"{list(self.scores.shape[:3])}, got {list(feats.shape)}")
        mask = self.arc_mask[..., None]
        zero = torch.zeros((), dtype=torch.float64, device=first.device)
        first64 = torch.where(mask, first.to(torch.float64), zero)
        second64 = torch.where(mask, second.to(torch.float64), zero)
        cov = lu_second_order.covariance(self._calm_factors, self._partition[1], first64, second64)
        bad = self._untrusted
        if bad.numel():
            exact = covariance_by_elimination(self._scores64[bad], self.lengths[bad], first64[bad],
                                              second64[bad], single_root=self.single_root)
            cov = cov.index_copy(0, bad, exact)
        cov = torch.where(torch.isfinite(self._partition[0])[:, None, None], cov, zero)
        return cov.to(torch.promote_types(first.dtype, second.dtype))

    def arc_pair_marginals(self, first: Tensor, second: Tensor) -> Tensor:
        """``[K]`` p(head(i) = j and head(k) = l) for ``K`` arc pairs: ``first [K, 3]`` rows
        ``(b, i, j)``, ``second [K, 3]`` rows ``(b, k, l)`` of the same sentence ``b``.

        The entries of :meth:`pairwise_marginals` that are asked for, without its O(N^4) memory:
        O(N^3) for the inverse Laplacian plus O(K); sentences the trust test sends to the exact path
        take one backward pass of it per distinct ``first`` arc. Differentiable (second-order GE
        constraints); labeled CRFs: arcs with their labels summed out.
        """
        self._check_pairs(first, second)
        out = lu_second_order.arc_pair_marginals(self._calm_factors, self._partition[1], first, second)
        bad = self._untrusted
        if bad.numel():
            position = torch.full((self.scores.shape[0],), -1, dtype=torch.long, device=first.device)
            position[bad] = torch.arange(bad.numel(), device=first.device)
            mine = (position[first[:, 0]] >= 0).nonzero().squeeze(1)
            if mine.numel():
                local = position[first[mine, 0]]
                exact = arc_pair_marginals_by_elimination(
                    self._scores64[bad], self.lengths[bad],
                    torch.cat([local[:, None], first[mine, 1:]], 1), torch.cat([local[:, None], second[mine, 1:]], 1),
                    single_root=self.single_root)
                out = out.index_put((mine,), exact)
        finite = torch.isfinite(self._partition[0])[first[:, 0]]
        return torch.where(finite, out, torch.zeros_like(out)).to(self.scores.dtype)

    def _check_pairs(self, first: Tensor, second: Tensor) -> None:
        for name, arcs in (("first", first), ("second", second)):
            if arcs.dim() != 2 or arcs.shape[1] != 3 or arcs.dtype != torch.long:
                raise ValueError(f"{name}: expected long [K, 3] rows (b, dep, head), got "
                                 f"{arcs.dtype} {list(arcs.shape)}")
        if first.shape != second.shape:
            raise ValueError(f"first {list(first.shape)} and second {list(second.shape)}: one row per pair")
        if not torch.equal(first[:, 0], second[:, 0]):
            raise ValueError("first and second: the arcs of a pair must be in one sentence (same b)")
        limits = torch.tensor([self.scores.shape[0], self.scores.shape[1], self.scores.shape[1]],
                              device=first.device)
        for name, arcs in (("first", first), ("second", second)):
            wrong = ((arcs < 0) | (arcs >= limits) | (arcs[:, 1:2] == 0)).any(1)
            if wrong.any():
                row = int(wrong.nonzero()[0, 0])
                raise ValueError(f"{name}[{row}] = {arcs[row].tolist()}: b, dep or head out of range "
                                 f"(dep 1..{self.scores.shape[1] - 1})")

    def pairwise_marginals(self) -> Tensor:
        """``[B, i, j, k, l]`` = p(head(i) = j, head(k) = l) over arcs; O(N^4) memory."""
        pair = lu_second_order.pairwise_marginals(self._calm_factors, self._partition[1])
        bad = self._untrusted
        if bad.numel():  # the exact path's second derivatives, O(N^5) for these sentences only
            exact = pairwise_marginals_by_elimination(self._scores64[bad], self.lengths[bad],
                                                      single_root=self.single_root)
            pair = pair.index_copy(0, bad, exact)
        finite = torch.isfinite(self._partition[0])[:, None, None, None, None]
        return torch.where(finite, pair, torch.zeros_like(pair)).to(self.scores.dtype)


def sparse_expectation(marginals: Tensor, arc_index: Tensor, feature_ids: Tensor, values: Tensor,
                       n_features: int) -> Tensor:
    """``[B, n_features]``: the marginals at ``arc_index`` rows (``(b, dep, head[, label])``) times
    ``values``, summed per sentence and feature (shared by the tree distributions)."""
    probs = marginals[tuple(arc_index.t())]
    out = torch.zeros(marginals.shape[0], n_features, dtype=values.dtype, device=values.device)
    flat = arc_index[:, 0] * n_features + feature_ids
    return out.reshape(-1).index_add(0, flat, probs.to(values.dtype) * values).reshape(out.shape)


@register_kl(TreeCRF, TreeCRF)
def _kl_tree_crf(p: TreeCRF, q: TreeCRF) -> Tensor:
    return p.kl(q)
