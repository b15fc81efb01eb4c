"""Feature expectations and second order of :class:`parser.structs.TreeCRF`: E[features]
(dense and sparse), covariance of arc features, pairwise and arc-pair marginals.

First order reads the marginals; second order comes from the inverse Laplacian
(:mod:`.lu_second_order`) and, for the sentences the trust test sends to the exact path, from the
Hessian of log-space elimination (:mod:`.elimination`). :class:`FeatureExpectations` is a mixin
over :class:`.partition.PartitionPath` (the host provides ``scores``, ``lengths``, ``labeled``,
``single_root``, ``arc_mask``, ``marginals`` and ``arc_marginals``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.common import sparse_expectation
from parser.structs.tree import lu_second_order
from parser.structs.tree.elimination import (
    arc_pair_marginals_by_elimination,
    covariance_by_elimination,
    pairwise_marginals_by_elimination,
)

__all__ = ["FeatureExpectations"]


class FeatureExpectations:
    """``expect``, ``expect_sparse``, ``covariance``, ``arc_pair_marginals``, ``pairwise_marginals``."""

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
