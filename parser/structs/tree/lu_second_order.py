"""Second order on the LU fast path: covariance of arc features (Zmigrod et al. 2021, T2) and
pairwise arc marginals (Druck & Smith 2009, eq. 3) from the inverse Laplacian.

With ``B = M^{-1}`` every arc ``e = (d, h)`` has ``d M = e_d u_e^T`` where ``u_e = e_d - e_h``
(multi-root; ``e_0 = 0``), ``[d != 1] e_d - [h != 1] e_h`` (single-root word arcs) or ``e_1``
(single-root ROOT arcs). Hence ``mu_e = A_e u_e^T B e_d`` and, with ``X[e, y] = A_e u_e^T B e_y``,
``Cov(e, e') = [e = e'] mu_e - X[e, dep(e')] X[e', dep(e)]``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.tree.laplacian import LaplacianFactors

__all__ = ["arc_pair_marginals", "arc_rows", "covariance", "pairwise_marginals"]


def arc_rows(factors: LaplacianFactors) -> Tensor:
    """``X [B, dep, head, y]`` with ``X[e, y] = A_e u_e^T B e_y`` (``y`` = word 1..N); O(N^3)."""
    weights, inverse = factors.weights, factors.inverse
    rows_dep, rows_head, root_rows = _row_vectors(inverse, single_root=factors.single_root)
    word_part = weights[:, 1:, 1:, None] * (rows_dep[:, :, None, :] - rows_head[:, None, :, :])
    root_part = weights[:, 1:, 0, None] * root_rows
    body = torch.cat([root_part[:, :, None, :], word_part], dim=2)
    return torch.cat([torch.zeros_like(body[:, :1]), body], dim=1)


def _row_vectors(inverse: Tensor, *, single_root: bool):
    """Rows of ``B`` picked by ``u_e``: dependent part, head part ``[B, N, N]``, ROOT part."""
    if not single_root:
        return inverse, inverse, inverse
    keep = torch.ones_like(inverse[:, :, :1])
    keep[:, 0] = 0.0
    masked = inverse * keep
    return masked, masked, inverse[:, :1, :].expand_as(inverse)


def _feature_rows(factors: LaplacianFactors, features: Tensor) -> Tensor:
    """``P[b, d, y, f] = sum_h f[d, h] X[(d, h), y]`` without materialising X: ``[B, N, N, F]``."""
    weights = factors.weights
    rows_dep, rows_head, root_rows = _row_vectors(factors.inverse, single_root=factors.single_root)
    weighted = features[:, 1:, :, :] * weights[:, 1:, :, None]  # [B, dep, head, F]
    word = weighted[:, :, 1:, :]
    root = weighted[:, :, 0, :]
    out = word.sum(2)[:, :, None, :] * rows_dep[..., None]
    out = out - torch.einsum("bdhf,bhy->bdyf", word, rows_head)
    return out + root[:, :, None, :] * root_rows[..., None]


def covariance(factors: LaplacianFactors, marginals: Tensor, first: Tensor, second: Tensor):
    """``Cov(first, second) [B, R, S]`` of arc-factored features ``[B, dep, head, R|S]``.

    O(N^3 (R + S) + N^2 R S) time and O(N^2 (R + S)) memory: the N^4 arc-pair covariance is
    never built.
    """
    diagonal = torch.einsum("bdhr,bdhs,bdh->brs", first, second, marginals)
    rows_first = _feature_rows(factors, first)
    rows_second = _feature_rows(factors, second)
    return diagonal - torch.einsum("bijr,bjis->brs", rows_first, rows_second)


def pairwise_marginals(factors: LaplacianFactors, marginals: Tensor) -> Tensor:
    """``[B, i, j, k, l]`` = p(head(i) = j, head(k) = l); O(N^4) (Druck & Smith 2009, eq. 3)."""
    rows = arc_rows(factors)  # [B, dep, head, y]
    size = marginals.shape[-1]
    rows = torch.cat([torch.zeros_like(rows[..., :1]), rows], dim=-1)  # y indexed 0..N
    left = rows[:, :, :, :, None]  # X[(i, j), k] -> [B, i, j, k, 1]
    right = rows.permute(0, 3, 1, 2)[:, :, None, :, :]  # X[(k, l), i] -> [B, i, 1, k, l]
    pair = marginals[:, :, :, None, None] * marginals[:, None, None, :, :] - left * right
    eye = torch.eye(size, dtype=torch.bool, device=marginals.device)
    same_arc = eye[:, None, :, None] & eye[None, :, None, :]  # i == k and j == l
    diagonal = marginals[:, :, :, None, None] * same_arc.to(marginals.dtype)
    return pair + diagonal


def arc_pair_marginals(factors: LaplacianFactors, marginals: Tensor, first: Tensor, second: Tensor) -> Tensor:
    """``[K]`` p(arc ``first[k]`` and arc ``second[k]``) for arcs ``[K, 3]`` rows ``(b, dep, head)``
    of one sentence each: the entries of :func:`pairwise_marginals` that are asked for, in
    O(N^3) (the inverse) plus O(K), never O(N^4)."""
    b, dep_e, head_e = first.unbind(1)
    _, dep_f, head_f = second.unbind(1)
    mu_e, mu_f = marginals[b, dep_e, head_e], marginals[b, dep_f, head_f]
    rows = _row_vectors(factors.inverse, single_root=factors.single_root)
    cross = (_arc_row_entries(factors.weights, rows, b, dep_e, head_e, dep_f)
             * _arc_row_entries(factors.weights, rows, b, dep_f, head_f, dep_e))
    pair = mu_e * mu_f - cross
    same_dep = dep_e == dep_f  # one word, two heads: never both; the same arc: its marginal
    return torch.where(same_dep, torch.where(head_e == head_f, mu_e, torch.zeros_like(pair)), pair)


def _arc_row_entries(weights: Tensor, rows: tuple[Tensor, Tensor, Tensor], b: Tensor, dep: Tensor,
                     head: Tensor, y: Tensor) -> Tensor:
    """``X[(dep, head), y]`` of :func:`arc_rows` at K points ``[K]``, from the rows of ``B`` that
    :func:`_row_vectors` picks: O(K)."""
    rows_dep, rows_head, root_rows = rows
    word = rows_dep[b, dep - 1, y - 1] - rows_head[b, (head - 1).clamp(min=0), y - 1]
    root = root_rows[b, dep - 1, y - 1]
    return weights[b, dep, head] * torch.where(head == 0, root, word)
