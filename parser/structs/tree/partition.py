"""The log Z / marginals path of :class:`parser.structs.TreeCRF` (one file for it).

Which route computes what, decided by the input alone (never by what is already cached):

- ``log_partition`` without a graph: the float64 LU's log Z where its factors certify it
  (:meth:`.laplacian.Factorization.log_z_certified`, no inverse); the other sentences take
  the marginals' route below, as a sub-batch.
- ``log_partition`` with a graph, the marginals, entropy and everything built on them: the LU fast
  path with the trust test (:func:`.laplacian.matrix_tree`; one unpadded CPU sentence without a
  graph: its numpy twin :func:`.one_sentence.one_sentence_factors`), then, for the sentences it
  does not trust, log-space elimination (:mod:`.elimination`), merged per sentence.

:class:`PartitionPath` is a mixin: the host (``TreeCRF``) provides ``scores``, ``lengths``,
``single_root``, ``labeled``, ``arc_scores``, ``arc_mask``, ``_off_arcs_masked``, ``_padded`` and
``_highest``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from parser.structs.common import NEG_INF, as_dtype, cached, extreme, numpy_ready
from parser.structs.tree import laplacian
from parser.structs.tree.elimination import log_partition_by_elimination
from parser.structs.tree.laplacian import Factorization, LaplacianFactors, matrix_tree
from parser.structs.tree.one_sentence import one_sentence_factors

__all__ = ["PartitionPath"]


class PartitionPath:
    """log Z and arc marginals (float64 inside, the input dtype outside)."""

    @cached
    def _scores64(self) -> Tensor:
        """``arc_scores`` in float64."""
        if (self.scores.dtype == torch.float64 or self.labeled or self._has_graph
                or "arc_scores" in self.__dict__):
            return as_dtype(self.arc_scores, torch.float64)
        # Lower-precision input: convert, then mask the copy in place (a pass fewer than masking
        # the input first; arc_scores in the input dtype is only built if asked for).
        return self._off_arcs_masked(self.scores.to(torch.float64), in_place=True)

    @property
    def _has_graph(self) -> bool:
        return torch.is_grad_enabled() and self.scores.requires_grad

    @property
    def _tolerance(self) -> float:
        return laplacian.TOLERANCE.get(self.scores.dtype, laplacian.DEFAULT_TOLERANCE)

    @cached
    def _lu(self) -> Factorization:
        # Every gap between two arc scores of a word is at most the scores' range (labels: plus
        # log L, the most a log-sum-exp over labels adds): within MAX_GAP, no gap to compute.
        span = self._highest - extreme(self.scores, "min")
        if self.labeled:
            span += math.log(self.scores.shape[-1])
        return Factorization(self._scores64, self.lengths, single_root=self.single_root, padded=self._padded,
                             span=span)

    @cached
    def _certified_log_z(self) -> Tensor:
        """``[B]`` float64 log Z without the inverse where the LU's factors prove it exact; the
        other sentences (a sub-batch) take the marginals' test and, if need be, elimination."""
        lu = self._lu
        certified = lu.log_z_certified(self._tolerance)
        if bool(certified.all()):
            return lu.log_z
        rest = (~certified).nonzero().squeeze(1)
        sub = type(self)(self._scores64[rest], self.lengths[rest], single_root=self.single_root)
        return lu.log_z.index_copy(0, rest, sub._partition[0])

    @cached
    def _factors(self) -> LaplacianFactors:
        scores = self.scores
        if scores.shape[0] == 1 and not self._padded and numpy_ready(scores) and not self._has_graph:
            # One sentence, no graph: the same fast path with numpy's cheaper per-op cost.
            arcs = self._scores64 if self.labeled else scores  # (unmasked is fine here)
            *parts, trusted, expected = one_sentence_factors(arcs, single_root=self.single_root,
                                                             tol=self._tolerance)
            return LaplacianFactors(*parts, trusted, expected, single_root=self.single_root)
        return matrix_tree(self._scores64, self.lengths, single_root=self.single_root,
                           tolerance=self._tolerance, padded=self._padded, factorization=self._lu)

    @cached
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

    @cached
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

    @cached
    def _untrusted(self) -> Tensor:
        """``[K]`` indices of the sentences computed by the exact (elimination) path."""
        return (~self._factors.trusted).nonzero().squeeze(1)

    @property
    def log_partition(self) -> Tensor:
        """``[B]`` log Z (over labeled trees when labeled); -inf when no tree is allowed."""
        return as_dtype(self._log_z64(), self.scores.dtype)

    def _log_z64(self) -> Tensor:
        """``[B]`` float64 log Z by the route the module docstring states: certified LU without a
        graph (no inverse), else the marginals' route (trusted LU, then elimination)."""
        if self._has_graph:
            return self._partition[0]
        return self._certified_log_z

    @cached
    def arc_marginals(self) -> Tensor:
        """``[B, dep, head]`` p(head(dep) = head); exactly 0 on padding, row 0 and diagonal."""
        if self.scores.dtype != torch.float64 and not self._has_graph:
            factors = self._factors
            if factors.all_trusted:  # ROOT's zero row and the input dtype in one pass
                rows = factors.marginal_rows
                out = rows.new_empty(rows.shape[0], rows.shape[2], rows.shape[2], dtype=self.scores.dtype)
                out.select(1, 0).zero_()
                out.narrow(1, 1, rows.shape[1]).copy_(rows)
                return out
        return as_dtype(self._partition[1], self.scores.dtype)
