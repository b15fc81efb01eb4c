"""Matrix-tree fast path: log Z, marginals and second-order quantities from one float64 LU.

Conventions (shared with :mod:`parser.structs.tree_crf`): ``scores[b, dep, head]`` of shape
``[B, N+1, N+1]``, index 0 is ROOT, ``lengths[b]`` counts words. The scores handed to these
functions are already masked: ``-inf`` on every arc that is not a real (dep, head) pair (padding,
row 0, the diagonal, arcs removed by ``restrict``).

The Laplacian is built with dependents as rows, ``M[b, d-1, x-1]`` for words ``d, x``:
``M[d, d] = sum of d's incoming weights`` (ROOT included for multi-root trees) and
``M[d, h] = -weight(h -> d)``; for single-root trees the column of word 1 is replaced by the
ROOT weights (Koo et al. 2007). Each dependent's scores are shifted by their maximum before
``exp`` (the shift is added back to log Z), padding words get an identity block.

With ``B = M^{-1}`` every arc ``e = (d, h)`` has ``d M = e_d u_e^T`` where ``u_e = e_d - e_h``
(multi-root; ``e_0 = 0``), ``[d != 1] e_d - [h != 1] e_h`` (single-root word arcs) or ``e_1``
(single-root ROOT arcs). Hence ``mu_e = A_e u_e^T B e_d`` and, with ``X[e, y] = A_e u_e^T B e_y``,
``Cov(e, e') = [e = e'] mu_e - X[e, dep(e')] X[e', dep(e)]`` (Zmigrod et al. 2021, T2; Druck &
Smith 2009, eq. 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["LaplacianFactors", "arc_rows", "covariance", "matrix_tree", "pairwise_marginals"]

# A sentence is trusted when its float64 marginals are this close to a distribution and the
# rounding error LU can make (eps * N * size of the cancelled terms) is below it. Results are
# returned in the input dtype, so the tolerance is far below that dtype's rounding.
TOLERANCE = {torch.float64: 1e-9, torch.float32: 2e-8}
DEFAULT_TOLERANCE = 1e-9
EPS64 = torch.finfo(torch.float64).eps


@dataclass(frozen=True)
class LaplacianFactors:
    """What the fast path computes, all float64.

    weights: ``[B, dep, head]`` shifted arc weights ``exp(score - max_head score)``, 0 off arcs.
    inverse: ``[B, N, N]`` inverse of the (Koo) Laplacian, rows/columns = words 1..N.
    log_z:   ``[B]`` log partition; ``-inf`` when no tree is allowed.
    marginals: ``[B, dep, head]`` arc marginals, exactly 0 off arcs.
    trusted: ``[B]`` bool, False where the LU result may be inexact (ill-conditioned Laplacian).
    single_root: the root constraint the Laplacian encodes.
    """

    weights: Tensor
    inverse: Tensor
    log_z: Tensor
    marginals: Tensor
    trusted: Tensor
    single_root: bool


def word_mask(lengths: Tensor, size: int) -> Tensor:
    """``[B, N+1]`` True on real words (positions ``1..lengths[b]``)."""
    positions = torch.arange(size, device=lengths.device)
    return (positions > 0) & (positions <= lengths[:, None])


def _laplacian(weights: Tensor, real: Tensor, *, single_root: bool) -> Tensor:
    """``weights [B, dep, head]``, ``real [B, N]`` (words) -> ``[B, N, N]`` Laplacian."""
    words = weights[:, 1:, 1:]
    root = weights[:, 1:, 0]
    incoming = words.sum(-1) + (0.0 if single_root else root)
    # Padding words get a 1 on the diagonal so the determinant is that of the real block.
    diagonal = incoming + (~real).to(weights.dtype)
    lap = torch.diag_embed(diagonal) - words
    if single_root:
        lap = torch.cat([root[:, :, None], lap[:, :, 1:]], dim=-1)
    return lap


def matrix_tree(
    scores: Tensor, lengths: Tensor, *, single_root: bool, tolerance: float = DEFAULT_TOLERANCE
) -> LaplacianFactors:
    """Log partition and marginals of masked float64 ``scores [B, dep, head]`` by LU.

    Differentiable (twice) through torch ops; the max-shift is treated as a constant, which is
    exact because log Z and the marginals do not depend on it. ``tolerance``: the largest
    estimated absolute error of log Z and of each marginal for a sentence to be ``trusted``.
    """
    size = scores.shape[-1]
    real_full = word_mask(lengths, size)
    real = real_full[:, 1:]
    shift = scores.detach().amax(-1)
    dead = (real_full & torch.isneginf(shift)).any(-1)  # a word with no allowed head: no tree
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    weights = torch.exp(scores - shift[..., None])
    lap = _laplacian(weights, real, single_root=single_root)
    eye = torch.eye(size - 1, dtype=lap.dtype, device=lap.device).expand_as(lap)
    lap = torch.where(dead[:, None, None], eye, lap)

    lu, pivots, _ = torch.linalg.lu_factor_ex(lap)
    diagonal = torch.diagonal(lu, dim1=-2, dim2=-1)
    log_z = torch.log(diagonal.abs()).sum(-1) + (shift * real_full).sum(-1)
    log_z = torch.where(dead, torch.full_like(log_z, float("-inf")), log_z)
    inverse = torch.linalg.lu_solve(lu, pivots, eye)
    marginals = _marginals(weights, inverse, single_root=single_root)
    marginals = torch.where(dead[:, None, None], torch.zeros_like(marginals), marginals)

    with torch.no_grad():
        swaps = (pivots != torch.arange(1, size, device=pivots.device)).sum(-1)
        sign = torch.where(swaps % 2 == 1, -1.0, 1.0) * torch.sign(diagonal).prod(-1)
        trusted = _trusted(weights, inverse, marginals, real_full, single_root, tolerance)
        trusted = dead | (trusted & (sign > 0) & torch.isfinite(log_z))
    return LaplacianFactors(weights, inverse, log_z, marginals, trusted, single_root)


def _marginals(weights: Tensor, inverse: Tensor, *, single_root: bool, absolute: bool = False):
    """``mu[d, h] = A[d, h] u_(d,h)^T B e_d`` assembled into ``[B, dep, head]``.

    ``absolute``: instead, the size of the terms that cancel, ``A (|B[d, d]| + |B[h, d]|)``.
    """
    words, root = weights[:, 1:, 1:], weights[:, 1:, 0]
    diag = torch.diagonal(inverse, dim1=-2, dim2=-1)  # B[d, d]
    column = inverse.transpose(-1, -2)  # column[d, h] = B[h, d]
    if single_root:
        keep = torch.ones_like(diag)
        keep[:, 0] = 0.0  # word 1's column is the ROOT column
        diag = diag * keep
        column = column * keep[:, None, :]
        root_coef = inverse[:, 0, :]
    else:
        root_coef = diag
    if absolute:
        word_part = words * (diag.abs()[:, :, None] + column.abs())
        root_part = root * root_coef.abs()
    else:
        word_part = words * (diag[:, :, None] - column)
        root_part = root * root_coef
    body = torch.cat([root_part[:, :, None], word_part], dim=-1)
    return torch.cat([torch.zeros_like(body[:, :1]), body], dim=1)


def _trusted(weights, inverse, marginals, real_full, single_root: bool, tol: float) -> Tensor:
    """``[B]`` bool: the LU marginals are a distribution and the cancellation is harmless."""
    finite = torch.isfinite(marginals).all(-1).all(-1)
    in_range = ((marginals >= -tol) & (marginals <= 1 + tol)).all(-1).all(-1)
    sums = marginals.sum(-1)
    normalised = (((sums - 1).abs() <= tol) | ~real_full).all(-1)
    # LU is backward stable here (diagonally dominant columns, growth <= 2): errors are about
    # eps * N * the terms that cancel in mu, and log Z's error is bounded by their sum.
    magnitude = _marginals(weights, inverse, single_root=single_root, absolute=True)
    n = real_full.sum(-1).clamp(min=1)
    small_error = EPS64 * n * magnitude.sum((-1, -2)) <= tol
    return finite & in_range & normalised & small_error


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
