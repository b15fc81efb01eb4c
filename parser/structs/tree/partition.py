"""The log Z / marginals path of :class:`parser.structs.TreeCRF` (one file for it).

Which route computes what, decided by the input alone (never by what is already cached):

- ``log_partition`` without a graph: the float64 LU's log Z where its factors certify it
  (:meth:`.laplacian.Factorization.log_z_certified`, no inverse); the other sentences take
  the marginals' route below, as a sub-batch.
- The marginals, entropy and everything built on them without a graph: the LU fast path with the
  trust test (:func:`.laplacian.matrix_tree`; one unpadded CPU sentence: its numpy twin
  :func:`.one_sentence.one_sentence_factors`), then, for the sentences it does not trust,
  log-space elimination (:mod:`.elimination`), merged per sentence.
- With a graph: log Z and the marginals are single nodes of the custom autograd Functions of
  :mod:`.autograd`, whose forward is the marginals' route above run by a detached twin
  (:class:`ArcPartition`) and whose backward is in closed form (marginals; Hessian-vector
  products from the inverse Laplacian, elimination's double backward for untrusted sentences).

:class:`PartitionPath` is a mixin: the host provides ``scores``, ``lengths``, ``single_root``,
``labeled``, ``arc_scores``, ``_padded`` and ``_highest``. :class:`ArcPartition` is the smallest
host (unlabeled arc scores, no distribution): the exact sampler's conditionals and the twin.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from parser.structs import common
from parser.structs.common import (
    NEG_INF,
    as_dtype,
    cached,
    check_scores_and_lengths,
    extreme,
    numpy_ready,
)
from parser.structs.tree import autograd, laplacian
from parser.structs.tree.elimination import log_partition_by_elimination
from parser.structs.tree.laplacian import Factorization, LaplacianFactors, matrix_tree
from parser.structs.tree.one_sentence import one_sentence_factors

__all__ = ["ArcPartition", "PartitionPath"]


class PartitionPath:
    """log Z and arc marginals (float64 inside, the input dtype outside)."""

    @cached
    def arc_mask(self) -> Tensor:
        """``[B, dep, head]`` bool: real arcs (word dep; ROOT or other word head)."""
        return common.arc_mask(self.lengths, self.scores.shape[1], padded=self._padded)

    def _off_arcs_masked(self, scores: Tensor, *, in_place: bool) -> Tensor:
        """``scores [B, dep, head]`` with -inf off arcs: unpadded, row 0 and the diagonal filled
        in place, or one add of a cached 0 / -inf mask (scores have no +inf); else a masked fill."""
        size = scores.shape[1]
        if not self._padded and in_place:  # row 0 and the diagonal: two small fills
            scores.select(1, 0).fill_(NEG_INF)
            scores.diagonal(dim1=1, dim2=2).fill_(NEG_INF)
            return scores
        if not self._padded:
            return scores + common.off_arc_penalty(size, scores.dtype, scores.device)
        mask = common.off_arc_mask(self.lengths, size)
        return scores.masked_fill_(mask, NEG_INF) if in_place else scores.masked_fill(mask, NEG_INF)

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
    def _span(self) -> float:
        # Every gap between two arc scores of a word is at most the scores' range (labels: plus
        # log L, the most a log-sum-exp over labels adds): within MAX_GAP, no gap to compute.
        span = self._highest - extreme(self.scores, "min")
        return span + math.log(self.scores.shape[-1]) if self.labeled else span

    @cached
    def _lu(self) -> Factorization:
        return self._factorization(solve=False)

    def _factorization(self, *, solve: bool) -> Factorization:
        return Factorization(self._scores64, self.lengths, single_root=self.single_root, padded=self._padded,
                             span=self._span, solve=solve)

    @cached
    def _certified_log_z(self) -> Tensor:
        """``[B]`` float64 log Z without the inverse where the LU's factors prove it exact; the
        other sentences (a sub-batch) take the marginals' test and, if need be, elimination."""
        lu = self._lu
        certified = lu.log_z_certified(self._tolerance)
        if bool(certified.all()):
            return lu.log_z
        rest = (~certified).nonzero().squeeze(1)
        if 2 * rest.numel() >= certified.numel():  # most fail: the marginals' route reuses this LU
            return self._partition[0]
        sub = ArcPartition(self._scores64[rest], self.lengths[rest], single_root=self.single_root)
        return lu.log_z.index_copy(0, rest, sub._partition[0])

    @cached
    def _factors(self) -> LaplacianFactors:
        """The LU fast path without a graph (with one: the detached twin's)."""
        if self._has_graph:
            return self._twin._factors
        scores = self.scores
        if scores.shape[0] == 1 and not self._padded and numpy_ready(scores):
            # One sentence, no graph: the same fast path with numpy's cheaper per-op cost.
            arcs = self._scores64 if self.labeled else scores  # (unmasked is fine here)
            *parts, trusted, expected = one_sentence_factors(arcs, single_root=self.single_root,
                                                             tol=self._tolerance)
            return LaplacianFactors(*parts, trusted, expected, single_root=self.single_root)
        if "_lu" not in self.__dict__:  # the inverse is wanted: factor and solve in one call
            self.__dict__["_lu"] = self._factorization(solve=True)
        return matrix_tree(self._scores64, self.lengths, single_root=self.single_root,
                           tolerance=self._tolerance, padded=self._padded, factorization=self._lu)

    # ----------------------------------------------------------------- with a graph
    @cached
    def _twin(self) -> ArcPartition:
        """This distribution's arc scores, detached: its no-graph route is the forward of the
        custom Functions (:mod:`.autograd`)."""
        return ArcPartition.detached_from(self)

    @property
    def _graph_input(self) -> Tensor:
        """What the custom Functions differentiate: the raw scores (unlabeled: their gradient off
        arcs is 0, as the marginals are) or the labels' log-sum-exp."""
        return self.arc_scores if self.labeled else self.scores

    @cached
    def _graph_log_z(self) -> Tensor:
        """``[B]`` float64 log Z with a graph (one node; backward: the marginals)."""
        return autograd.log_partition(self._graph_input, self._twin)

    # ----------------------------------------------------------------- the route
    @cached
    def _partition(self) -> tuple[Tensor, Tensor]:
        """``(log Z [B], arc marginals [B, dep, head])`` in float64, robust path merged in."""
        if self._has_graph:
            return self._graph_log_z, autograd.marginals(self._graph_input, self._twin)
        factors = self._factors
        log_z, marginals = factors.log_z, factors.marginals
        if factors.all_trusted:  # (trusted: within [-1e-300, 1 + tol], rounding; see _partition's end)
            return log_z, marginals.clamp(0.0, 1.0)
        bad = (~factors.trusted).nonzero().squeeze(1)
        if bad.numel():
            # (inference_mode(False): autograd cannot record inference tensors)
            with torch.inference_mode(False), torch.enable_grad():
                sub = self._scores64[bad].clone().requires_grad_()
                sub_z = log_partition_by_elimination(sub, self.lengths[bad], single_root=self.single_root)
                (sub_mu,) = torch.autograd.grad(sub_z.sum(), sub)
            sub_z = sub_z.detach()
            finite = torch.isfinite(sub_z)[:, None, None] & self.arc_mask[bad]
            sub_mu = torch.where(finite, sub_mu, torch.zeros_like(sub_mu))
            log_z = log_z.index_copy(0, bad, sub_z)
            # Exact marginals lie in [0, 1]; autograd through elimination's pivot subtraction
            # leaves rounding-sized excursions (-1e-17) outside. (The trusted LU ones are within
            # the trust test's bounds: >= -1e-300, <= 1 + tol; cleared below.)
            marginals = marginals.index_copy(0, bad, sub_mu.clamp_(0.0, 1.0))
        return log_z, marginals.clamp(0.0, 1.0)

    @cached
    def _calm_factors(self) -> LaplacianFactors:
        """The fast path, with a graph when there is one (untrusted sentences' scores set to 0:
        their values come from the exact path; this keeps NaN out of the LU's backward)."""
        if not self._has_graph:
            return self._factors
        return autograd.graph_factors(self._scores64, self._twin)

    @cached
    def _untrusted(self) -> Tensor:
        """``[K]`` indices of the sentences computed by the exact (elimination) path."""
        return (~self._factors.trusted).nonzero().squeeze(1)

    @property
    def log_partition(self) -> Tensor:
        """``[B]`` log Z (over labeled trees when labeled); -inf when no tree is allowed. A log Z
        beyond the input dtype's range (finite scores) is a ValueError, never a silent inf."""
        return self._in_range(as_dtype(self._log_z64(), self.scores.dtype))

    def _log_z64(self) -> Tensor:
        """``[B]`` float64 log Z by the route the module docstring states: certified LU without a
        graph (no inverse); with one, the custom Function (no marginals built in the graph)."""
        if self._has_graph:
            log_z = self._graph_log_z
        elif "_factors" in self.__dict__:  # (already computed: no second LU)
            log_z = self._partition[0]
        else:
            log_z = self._certified_log_z
        return self._in_range(log_z)

    def _in_range(self, log_z: Tensor) -> Tensor:
        """``log_z``, or a ValueError where it is infinite although the sentence's arcs are all
        finite (then a tree of finite score exists: the exact log Z lies beyond the dtype's range).
        Only looked at (one sync) when the scores' size allows it: |log Z| <= (N + 1) max |s|."""
        extent = max(abs(self._highest), abs(self._highest - self._span))
        if not extent * (self.scores.shape[1] + 1) >= torch.finfo(log_z.dtype).max / 4:
            return log_z
        finite = torch.isfinite(self.arc_scores) | ~self.arc_mask
        bad = torch.isinf(log_z).detach() & finite.flatten(1).all(-1)
        if bool(bad.any()):
            b = int(bad.nonzero()[0, 0])
            raise ValueError(f"log Z of sentence {b} = {float(log_z[b])} is beyond {log_z.dtype}'s range: "
                             f"scores up to |{extent:g}| over {int(self.lengths[b])} words; scale them down")
        return log_z

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


class ArcPartition(PartitionPath):
    """log Z and marginals of unlabeled arc scores ``[B, dep, head]`` (any float dtype; masked
    here): :class:`parser.structs.TreeCRF`'s route without the distribution."""

    labeled = False

    def __init__(self, scores: Tensor, lengths: Tensor, *, single_root: bool) -> None:
        scores, self._padded, self._highest = check_scores_and_lengths(scores, lengths)
        self.scores = scores
        self.lengths = (lengths if lengths.dtype == torch.long and lengths.device == scores.device
                        else lengths.to(device=scores.device, dtype=torch.long))
        self.single_root = bool(single_root)

    @classmethod
    def detached_from(cls, host: PartitionPath) -> ArcPartition:
        """``host``'s arc scores without their graph (no input check: the host made it); the
        host's span, so the same route decisions."""
        twin = cls.__new__(cls)
        scores = host._graph_input.detach()
        twin.scores, twin.lengths, twin.single_root = scores, host.lengths, host.single_root
        twin._padded, twin._highest = host._padded, host._highest
        twin.__dict__["_span"] = host._span
        if host.labeled:  # already masked
            twin.__dict__["arc_scores"] = scores
        if "arc_mask" in host.__dict__:
            twin.__dict__["arc_mask"] = host.arc_mask
        return twin

    @cached
    def arc_scores(self) -> Tensor:
        """``[B, dep, head]`` the scores with -inf off arcs."""
        return self._off_arcs_masked(self.scores, in_place=False)
