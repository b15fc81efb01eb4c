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

from functools import lru_cache

import torch
from torch import Tensor

__all__ = ["LaplacianFactors", "arc_mask", "arc_rows", "covariance", "matrix_tree", "pairwise_marginals"]

# A sentence is trusted when its float64 marginals are this close to a distribution and the
# rounding error LU can make (eps * N * size of the cancelled terms) is below it. Results are
# returned in the input dtype, so the tolerance is far below that dtype's rounding.
TOLERANCE = {torch.float64: 1e-9, torch.float32: 2e-8}
DEFAULT_TOLERANCE = 1e-9
EPS64 = torch.finfo(torch.float64).eps


class LaplacianFactors:
    """What the fast path computes, all float64.

    weights: ``[B, dep, head]`` shifted arc weights ``exp(score - max_head score)``, 0 off arcs.
    inverse: ``[B, N, N]`` inverse of the (Koo) Laplacian, rows/columns = words 1..N.
    log_z:   ``[B]`` log partition; ``-inf`` when no tree is allowed.
    marginals: ``[B, dep, head]`` arc marginals, exactly 0 off arcs.
    trusted: ``[B]`` bool, False where the LU result may be inexact (ill-conditioned Laplacian);
    all_trusted: the same for the whole batch, one Python bool.
    entropy: ``[B]`` ``log_z - sum(marginals * scores)`` as the trust test computed it (detached;
    the tree entropy wherever ``trusted``).
    single_root: the root constraint the Laplacian encodes.

    The word rows ``[B, N, N+1]`` are what the fast path computes; the full-shape ``weights`` and
    ``marginals`` (row 0 added) are built on first use, since log Z and entropy never need them.
    """

    __slots__ = ("_marginals", "_terms", "_trusted", "_weights", "all_trusted", "entropy", "inverse",
                 "log_z", "marginal_rows", "single_root", "tolerance", "weight_rows")

    def __init__(self, weight_rows: Tensor, inverse: Tensor, log_z: Tensor, marginal_rows: Tensor,
                 terms: Tensor, entropy: Tensor, *, single_root: bool, tolerance: float) -> None:
        self.weight_rows, self.inverse, self.log_z = weight_rows, inverse, log_z
        self.marginal_rows, self.entropy, self.single_root = marginal_rows, entropy, single_root
        self.tolerance = tolerance
        self._terms = terms
        self._weights = self._marginals = self._trusted = None
        # One reduction and one sync for the common all-trusted case (NaN compares False).
        self.all_trusted = bool(float(terms.amax()) <= tolerance) if terms.numel() else True

    @property
    def trusted(self) -> Tensor:
        if self._trusted is None:
            self._trusted = (self._terms <= self.tolerance).all(-1)
        return self._trusted

    @property
    def weights(self) -> Tensor:
        if self._weights is None:
            self._weights = _with_row_zero(self.weight_rows)
        return self._weights

    @property
    def marginals(self) -> Tensor:
        if self._marginals is None:
            self._marginals = _with_row_zero(self.marginal_rows)
        return self._marginals


def _with_row_zero(rows: Tensor) -> Tensor:
    """``[B, N, N+1]`` word rows -> ``[B, N+1, N+1]`` with a zero ROOT row."""
    return torch.constant_pad_nd(rows, (0, 0, 1, 0))  # the aten op: no Python wrapper per call


class _Constants:
    """Per-size constants (cached; never written to)."""

    def __init__(self, size: int, device: torch.device) -> None:
        n = size - 1
        self.positions = torch.arange(size, device=device)  # [S]
        self.word_positions = self.positions.narrow(0, 1, n)  # [N]: 1..N
        self.pivot_positions = torch.arange(1, size, dtype=torch.int32, device=device)  # LAPACK's
        arcs = ~torch.eye(size, dtype=torch.bool, device=device)
        arcs[0] = False
        self.arcs = arcs  # [S, S] arc mask of an unpadded sentence
        self.eye = torch.eye(n, dtype=torch.float64, device=device)  # [N, N]
        not_first = torch.ones(n, 1, dtype=torch.float64, device=device)
        not_first[0] = 0.0
        self.not_first = not_first  # [N, 1]
        self.one = torch.ones((), dtype=torch.float64, device=device)


@lru_cache(maxsize=64)
def _constants(size: int, device: torch.device) -> _Constants:
    return _Constants(size, device)


def word_mask(lengths: Tensor, size: int) -> Tensor:
    """``[B, N+1]`` True on real words (positions ``1..lengths[b]``)."""
    positions = _constants(size, lengths.device).positions
    return (positions > 0) & (positions <= lengths[:, None])


def arc_mask(lengths: Tensor, size: int, *, padded: bool = True) -> Tensor:
    """``[B, dep, head]`` bool: real arcs (word dependent; ROOT or another word as head).

    ``padded=False`` promises ``lengths == size - 1`` everywhere: a broadcast cached mask.
    """
    constants = _constants(size, lengths.device)
    if not padded:
        return constants.arcs.expand(lengths.shape[0], size, size)
    heads = constants.positions <= lengths[:, None]  # ROOT and words
    return heads[:, :, None] & heads[:, None, :] & constants.arcs


def matrix_tree(
    scores: Tensor, lengths: Tensor, *, single_root: bool, tolerance: float = DEFAULT_TOLERANCE,
    padded: bool = True,
) -> LaplacianFactors:
    """Log partition and marginals of masked float64 ``scores [B, dep, head]`` by LU.

    Differentiable (twice) through torch ops; the max-shift is treated as a constant, which is
    exact because log Z and the marginals do not depend on it. ``tolerance``: the largest
    estimated absolute error of log Z and of each marginal for a sentence to be ``trusted``.
    A sentence with no tree (a word without allowed heads) has a singular Laplacian and is never
    trusted: the caller's exact path returns -inf for it. ``padded=False`` promises that every
    sentence fills the tensor (skips the padding bookkeeping).
    """
    size = scores.shape[-1]
    n = size - 1
    constants = _constants(size, scores.device)
    # Per-op overhead dominates small sentences: everything works on the word rows [B, N, N+1]
    # (row 0 is all -inf), with narrow/select views rather than tuple indexing.
    rows = scores.narrow(1, 1, n)
    # Padding rows are all -inf: their shift becomes 0 and their weights 0.
    shift = torch.nan_to_num(rows.detach().amax(-1), neginf=0.0)  # [B, N]
    weights = torch.exp(rows - shift.unsqueeze(-1))  # [B, dep word, head]
    words, root = weights.narrow(2, 1, n), weights.select(2, 0)
    incoming = words.sum(-1) if single_root else words.sum(-1) + root
    lap = -words  # rows: dependents; the diagonal of ``words`` is 0
    # Padding words get a 1 on the diagonal so the determinant is that of the real block.
    real = lengths.unsqueeze(-1) >= constants.word_positions if padded else None  # [B, N] words
    if real is not None:
        incoming = torch.where(real, incoming, constants.one)
    lap.diagonal(dim1=-2, dim2=-1).copy_(incoming)
    if single_root:
        lap.select(2, 0).copy_(root)  # Koo et al.: word 1's column holds the ROOT weights

    lu, pivots, _ = torch.linalg.lu_factor_ex(lap)
    diag_u = lu.diagonal(dim1=-2, dim2=-1)
    log_z = (diag_u.abs().log() + shift).sum(-1)
    if lap.requires_grad:  # inv's backward is two products; lu_solve's goes back through the LU
        inverse = torch.linalg.inv_ex(lap)[0]
    else:
        inverse = torch.linalg.lu_solve(lu, pivots, constants.eye.expand_as(lap))
    marginal_rows = weights * _coefficients(inverse, constants.not_first, single_root=single_root)
    checked = (lap, inverse, diag_u, marginal_rows, rows, log_z)
    if scores.requires_grad:  # the test is not differentiated; detach only when there is a graph
        checked = tuple(t.detach() for t in checked)
    terms, entropy = _trust_terms(*checked[:3], pivots, *checked[3:], real, constants, tolerance)
    return LaplacianFactors(weights, inverse, log_z, marginal_rows, terms, entropy,
                            single_root=single_root, tolerance=tolerance)


def _coefficients(inverse: Tensor, not_first: Tensor, *, single_root: bool) -> Tensor:
    """``[B, dep word, head]`` with ``mu = weights * coefficients``: ``u_(d,h)^T B e_d``.

    Word heads: ``B[d, d] - B[h, d]`` (single-root: the terms of word 1 dropped, its column holds
    the ROOT weights); ROOT: ``B[1, d]`` (single-root) or ``B[d, d]``.
    """
    # Zeroing row 1 of B drops word 1's terms from both B[d, d] and B[h, d] in one op.
    kept = inverse * not_first if single_root else inverse
    diag = kept.diagonal(dim1=-2, dim2=-1)  # B[d, d]
    words = diag.unsqueeze(-1) - kept.mT  # [d, h]: B[d, d] - B[h, d]
    root_coef = inverse.select(1, 0) if single_root else diag
    return torch.cat([root_coef.unsqueeze(-1), words], dim=-1)


def _trust_terms(lap: Tensor, inverse: Tensor, diag_u: Tensor, pivots: Tensor, marginal_rows: Tensor,
                 rows: Tensor, log_z: Tensor, real: Tensor | None, constants: _Constants,
                 tol: float) -> tuple[Tensor, Tensor]:
    """``([B, 5] error terms, [B] entropy)``: the LU result is accurate to ``tol`` where every
    term is ``<= tol`` (NaN fails), and ``log Z - E[score]`` (the entropy where accurate), which
    the test needs anyway.

    LU is backward stable: it is the exact LU of ``M + dM`` with ``|dM| <~ eps N |M|`` while
    the growth stays small, so log Z moves by ``tr(B dM) <= eps N tr(|B| |M|)``, the total size
    of the terms that cancel in the marginals (padding adds 1 per padding word, harmless). That
    bound uses the computed ``B`` and assumes small growth, so it is not enough alone (scores
    x 100 give trusted-looking wrong results): the marginals must also be a distribution and the
    determinant positive. The marginals are checked by ``sum mu log mu`` (NaN if one is
    negative) and each word's sum (with all marginals >= 0, a sum within ``tol`` of 1 also puts
    each in [0, 1 + tol]). Even then a determinant can be off by many nats while the marginals
    are right (scores x 300, measured), so log Z is checked against the entropy's exact bounds:
    ``0 <= H = log Z - E[score] <= sum_d H(head(d))`` (a tree's entropy is at most the sum of
    its words' head entropies), which pins log Z down exactly where LU struggles, on nearly
    deterministic sentences.
    """
    cancelled = (lap.abs() * inverse.abs().mT).sum((-1, -2))
    sums = marginal_rows.sum(-1)  # [B, N]
    residual = torch.linalg.vector_norm(sums - (1.0 if real is None else real.to(sums.dtype)),
                                        float("inf"), dim=-1)
    # det sign: -1 per negative pivot of U and per row swap (LAPACK pivots >= their row).
    det_sign = torch.where(pivots != constants.pivot_positions, -diag_u, diag_u).sign().prod(-1)
    finite = torch.nan_to_num(rows, neginf=0.0)
    entropy = log_z - (marginal_rows * finite).sum((-1, -2))
    plogp = torch.xlogy(marginal_rows, marginal_rows).sum((-1, -2))  # -spread; NaN if mu < 0
    score_size = torch.linalg.vector_norm(finite, 1, dim=(-1, -2))  # E[score] error per mu error
    # Every term is a linear combination of these: one product instead of an op per term.
    parts = torch.stack([cancelled, residual, det_sign, entropy, score_size, plogp], dim=-1)
    return parts @ _term_matrix(lap.shape[-1], tol, lap.device), entropy


@lru_cache(maxsize=256)
def _term_matrix(n: int, tol: float, device: torch.device) -> Tensor:
    """``[6, 5]``: (cancelled, residual, det sign, H, sum |score|, sum mu log mu) -> the error
    terms ``eps N cancelled``, ``residual``, ``-sign``, ``-H - slack``, ``H - slack - spread``
    (``slack = tol sum |score|``; ``0 - slack <= H <= spread + slack`` in the ``<= tol`` form)."""
    matrix = torch.zeros(6, 5, dtype=torch.float64)
    matrix[0, 0] = EPS64 * max(n, 1)
    matrix[1, 1] = 1.0
    matrix[2, 2] = -1.0
    matrix[3, 3], matrix[3, 4] = -1.0, 1.0
    matrix[4, 3] = matrix[4, 4] = -tol
    matrix[5, 4] = 1.0
    return matrix.to(device)


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
