"""Matrix-tree fast path: log Z and marginals from one float64 LU (second order:
:mod:`.lu_second_order`; the trust test: :mod:`.trust`).

Conventions (shared with :mod:`parser.structs.tree.crf`): ``scores[b, dep, head]`` of shape
``[B, N+1, N+1]``, index 0 is ROOT, ``lengths[b]`` counts words. The scores handed to these
functions are already masked: ``-inf`` on every arc that is not a real (dep, head) pair (padding,
row 0, the diagonal, arcs removed by ``restrict``).

The Laplacian is built with dependents as rows, ``M[b, d-1, x-1]`` for words ``d, x``:
``M[d, d] = sum of d's incoming weights`` (ROOT included for multi-root trees) and
``M[d, h] = -weight(h -> d)``; for single-root trees the column of word 1 is replaced by the
ROOT weights (Koo et al. 2007). Each dependent's scores are shifted by their maximum before
``exp`` (the shift is added back to log Z), padding words get an identity block.

With ``B = M^{-1}`` every arc ``e = (d, h)`` has marginal ``mu_e = A_e u_e^T B e_d`` where
``u_e = e_d - e_h`` (multi-root; ``e_0 = 0``), ``[d != 1] e_d - [h != 1] e_h`` (single-root word
arcs) or ``e_1`` (single-root ROOT arcs).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch import Tensor

from parser.structs.tree.trust import MAX_GAP, trust

__all__ = ["Factorization", "LaplacianFactors", "matrix_tree"]

# A sentence is trusted when its float64 marginals are this close to a distribution and the
# rounding error LU can make (eps * N * size of the cancelled terms) is below it. Results are
# returned in the input dtype, so the tolerance is far below that dtype's rounding.
TOLERANCE = {torch.float64: 1e-9, torch.float32: 2e-8}
DEFAULT_TOLERANCE = 1e-9


class LaplacianFactors:
    """What the fast path computes, all float64.

    weights: ``[B, dep, head]`` shifted arc weights ``exp(score - max_head score)``, 0 off arcs.
    inverse: ``[B, N, N]`` inverse of the (Koo) Laplacian, rows/columns = words 1..N.
    log_z:   ``[B]`` log partition; ``-inf`` when no tree is allowed.
    marginals: ``[B, dep, head]`` arc marginals, exactly 0 off arcs.
    trusted: ``[B]`` bool, False where the LU result may be inexact (ill-conditioned Laplacian);
    all_trusted: the same for the whole batch, one Python bool.
    expected: ``[B]`` ``sum(marginals * scores)`` as the trust test computed it (detached);
    entropy: ``log_z - expected`` (detached; the tree entropy wherever ``trusted``), on first use.
    single_root: the root constraint the Laplacian encodes.

    The fast path computes word rows ``[B, N, N+1]`` and ``solved`` (see :func:`matrix_tree`;
    without a graph its buffer becomes the marginals and it is solved again on first use);
    the full-shape ``weights`` and ``marginals`` (row 0 added) and ``inverse`` are built on first
    use, since log Z and entropy never need them.
    """

    __slots__ = ("_entropy", "_factorization", "_inverse", "_marginals", "_solved", "_trusted", "_weights",
                 "all_trusted", "expected", "log_z", "marginal_rows", "single_root", "weight_rows")

    def __init__(self, weight_rows: Tensor, solved: Tensor | None, log_z: Tensor, marginal_rows: Tensor,
                 trusted: Tensor | bool, expected: Tensor, *, single_root: bool,
                 inverse: Tensor | None = None, factorization: Factorization | None = None) -> None:
        self.weight_rows, self._solved, self.log_z = weight_rows, solved, log_z
        self._factorization = factorization  # to solve again when ``solved`` was overwritten
        self.marginal_rows, self.expected, self.single_root = marginal_rows, expected, single_root
        self._inverse, self._entropy = inverse, None
        self._weights = self._marginals = None
        if isinstance(trusted, bool):  # one sentence, tested in Python
            self.all_trusted, self._trusted = trusted, None
        else:
            self._trusted = trusted
            self.all_trusted = bool(trusted.all()) if trusted.numel() else True

    @property
    def trusted(self) -> Tensor:
        if self._trusted is None:
            self._trusted = torch.tensor([self.all_trusted], device=self.log_z.device)
        return self._trusted

    @property
    def entropy(self) -> Tensor:
        if self._entropy is None:
            self._entropy = self.log_z.detach() - self.expected
        return self._entropy

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

    @property
    def solved(self) -> Tensor:
        """``M^{-T} rhs`` ``[B, N, N+1]`` (see :func:`matrix_tree`)."""
        if self._solved is None:
            fact = self._factorization
            self._solved = torch.linalg.lu_solve(fact.lu, fact.pivots, fact.constants.rhs[self.single_root])
        return self._solved

    @property
    def inverse(self) -> Tensor:
        """``B = M^{-1}`` from ``solved``: its columns y + 1 are ``-B^T`` (single-root: word 1's
        row of B is zeroed there and column 0 holds it)."""
        if self._inverse is None:
            solved = self.solved
            if self.single_root:
                transposed = torch.cat([solved.narrow(2, 0, 1), -solved.narrow(2, 2, solved.shape[2] - 2)], 2)
            else:
                transposed = -solved.narrow(2, 1, solved.shape[2] - 1)
            self._inverse = transposed.mT
        return self._inverse


def _with_row_zero(rows: Tensor) -> Tensor:
    """``[B, N, N+1]`` word rows -> ``[B, N+1, N+1]`` with a zero ROOT row."""
    return torch.constant_pad_nd(rows, (0, 0, 1, 0))  # the aten op: no Python wrapper per call


class _Storage:
    """The constants for every size up to ``capacity`` (sizes count ROOT), in one allocation."""

    def __init__(self, capacity: int, device: torch.device) -> None:
        n = capacity - 1
        f64 = {"dtype": torch.float64, "device": device}
        self.capacity = capacity
        self.positions = torch.arange(capacity, device=device)
        self.pivot_positions = torch.arange(1, capacity, dtype=torch.int32, device=device)  # LAPACK's
        self.one = torch.ones((), **f64)
        self.head_signs = -torch.ones(capacity, **f64)
        self.head_signs[0] = 1.0
        multi = torch.cat([torch.zeros(n, 1, **f64), -torch.eye(n, **f64)], 1)
        single = multi.clone()
        single[0, 0], single[0, 1] = 1.0, 0.0
        self.rhs = {False: multi, True: single}
        self.spread = {False: -torch.ones(capacity, **f64), True: self.head_signs.clamp(max=0.0)}
        self.comparison_signs = -torch.ones(n, n, **f64)
        self.comparison_signs.diagonal().fill_(1.0)
        self.ones_column = torch.ones(n, 1, **f64)


_STORAGE: dict[torch.device, _Storage] = {}


class _Constants:
    """Per-size constants, views into the device's :class:`_Storage` (top-left blocks), so that
    caching every size costs no memory per size; never written to."""

    def __init__(self, size: int, device: torch.device) -> None:
        big = _STORAGE.get(device)
        if big is None or big.capacity < size:  # grows by doubling; old views stay valid
            big = _STORAGE[device] = _Storage(max(size, 64, 2 * big.capacity if big else 0), device)
        n = size - 1
        self.positions = big.positions.narrow(0, 0, size)  # [S]
        self.word_positions = big.positions.narrow(0, 1, n)  # [N]: 1..N
        self.pivot_positions = big.pivot_positions.narrow(0, 0, n)  # [N] int32: 1..N
        self.one = big.one
        # Heads [S]: +1 for ROOT, -1 for words (the Laplacian's off-diagonal signs).
        self.head_signs = big.head_signs.narrow(0, 0, size)
        # solved = M^{-T} rhs [N, S]: multi-root [0 | -I]; single-root [e_1 | -I without (1, 1)].
        self.rhs = {k: v.narrow(0, 0, n).narrow(1, 0, size) for k, v in big.rhs.items()}
        # coefficients = solved + diag * spread [S]: 0 for ROOT (single-root), -1 elsewhere.
        self.spread = {k: v.narrow(0, 0, size) for k, v in big.spread.items()}
        # +1 on the diagonal, -1 off it [N, N]; a column of ones [N, 1].
        self.comparison_signs = big.comparison_signs.narrow(0, 0, n).narrow(1, 0, n)
        self.ones_column = big.ones_column.narrow(0, 0, n)


@lru_cache(maxsize=1024)
def _constants(size: int, device: torch.device) -> _Constants:
    with torch.inference_mode(False):  # cached: must not be inference tensors (a graph saves them)
        return _Constants(size, device)


class Factorization:
    """One LU of each sentence's (shifted, float64) Laplacian: what log Z needs.

    weights: ``[B, N, N+1]`` word rows of the shifted arc weights; table: the Laplacian in that
    layout (column h + 1 = word h's column of M, column 0 = ROOT weights); lap: ``[B, N, N]``
    the Laplacian M itself (a view of ``table``); lu, pivots: LAPACK's LU of ``M^T``; log_z
    ``[B]``; shift ``[B, N]``: each word's largest score (subtracted before ``exp``). ``span``: an
    upper bound on the scores' range (e.g. max - min of the input); within
    :data:`.trust.MAX_GAP` no weight can underflow and :attr:`gap_ok` is not computed.
    """

    __slots__ = ("_gap_ok", "_incoming", "_root", "_span", "abs_diag_u", "constants", "diag_u", "log_det", "log_z",
                 "lu", "padding", "pivots", "rows", "shift", "single_root", "solved", "table", "weights")

    def __init__(self, scores: Tensor, lengths: Tensor, *, single_root: bool, padded: bool,
                 span: float = math.inf, solve: bool = False) -> None:
        size = scores.shape[-1]
        n = size - 1
        constants = self.constants = _constants(size, scores.device)
        self.single_root = single_root
        # Per-op overhead dominates small sentences: everything works on the word rows
        # [B, N, N+1] (row 0 is all -inf), with narrow/select views rather than tuple indexing.
        rows = self.rows = scores.narrow(1, 1, n)
        shift = (rows.detach() if scores.requires_grad else rows).amax(-1)  # [B, N]
        if padded:  # padding rows are all -inf: their shift becomes 0 and their weights 0
            shift = torch.nan_to_num(shift, neginf=0.0)
        self.shift = shift
        self._span, self._gap_ok = span, None
        # (Unpadded, a word without any allowed head gets NaN weights: every test fails on NaN.)
        weights = rows - shift.unsqueeze(-1)
        # [B, dep word, head]; in place without a graph (one buffer fewer to allocate)
        weights = self.weights = weights.exp() if scores.requires_grad else weights.exp_()
        words, root = weights.narrow(2, 1, n), weights.select(2, 0)
        # (multi-root: every head counts, ROOT included: one reduction over the whole row)
        incoming = words.sum(-1) if single_root else weights.sum(-1)
        # Padding words get a 1 on the diagonal so the determinant is that of the real block.
        padding = self.padding = lengths.unsqueeze(-1) < constants.word_positions if padded else None
        if padding is not None:  # (their incoming weights are 0)
            incoming = incoming + padding
        self._incoming, self._root = incoming, root
        # M[d, d] sits at offset 1 of ``table``; single root (Koo et al.): word 1's column := ROOT's.
        table = weights * constants.head_signs
        if scores.requires_grad:  # out of place, for autograd
            table = torch.diagonal_scatter(table, incoming, 1, dim1=-2, dim2=-1)
            if single_root:
                table = torch.select_scatter(table, root, 2, 1)
        else:  # in place: two fewer copies of the whole batch
            table.diagonal(1, dim1=-2, dim2=-1).copy_(incoming)
            if single_root:
                table.select(2, 1).copy_(root)
        self.table = table
        # LU of M^T (same determinant): ``table`` is row-major, so M^T is LAPACK's column-major
        # layout, and the solve below is a plain (not adjoint) one, which is faster.
        # ``solve``: also ``solved = M^{-T} rhs`` (see :func:`matrix_tree`) in the same LAPACK call
        # (getrf + getrs in one op): lu_solve alone re-checks the pivots with two host syncs and
        # copies the right-hand side again. (``_linalg_solve_ex`` is the op behind
        # ``torch.linalg.solve_ex`` that also returns the factors.)
        self.solved = None
        if solve and not scores.requires_grad:
            rhs = constants.rhs[single_root]
            self.solved, self.lu, self.pivots, _ = torch.ops.aten._linalg_solve_ex(self.lap.mT, rhs)
        else:
            self.lu, self.pivots, _ = torch.linalg.lu_factor_ex(self.lap.mT)
        self.diag_u = self.lu.diagonal(dim1=-2, dim2=-1)
        self.abs_diag_u = self.diag_u.abs()
        self.log_det = self.abs_diag_u.log().sum(-1)  # of the shifted Laplacian
        self.log_z = self.log_det + shift.sum(-1)

    @property
    def lap(self) -> Tensor:
        return self.table.narrow(2, 1, self.table.shape[1])

    @property
    def log_head_functions(self) -> Tensor:
        """``[B]`` log of the shifted weight of all head functions, ``sum_d log sum_h w(h, d)``
        (ROOT included; padding words add log 1): ``log_det <= it``, since every tree is one."""
        totals = self._incoming + self._root if self.single_root else self._incoming
        return totals.log().sum(-1)

    @property
    def gap_ok(self) -> Tensor | None:
        """``[B]`` bool: no real arc lies more than :data:`.trust.MAX_GAP` below its word's best
        score (beyond, its weight is subnormal or 0); None when the span guarantees it."""
        if self._span <= MAX_GAP:
            return None
        if self._gap_ok is None:
            rows = self.rows.detach()
            lowest = torch.nan_to_num(rows, neginf=float("inf")).amin(-1)  # off arcs ignored
            self._gap_ok = (self.shift - lowest).amax(-1) <= MAX_GAP  # padding words: 0 - inf
        return self._gap_ok

    def log_z_certified(self, tol: float) -> Tensor:
        """``[B]`` bool: LU's log Z is provably within ``tol`` of the exact log Z, from the
        factors alone (no inverse). Rigorous where True; False may be wrong (the marginals'
        test and the exact path then decide).

        LAPACK's LU (of ``M^T`` here; the same determinant, written M below) is the exact LU
        of ``PM + E`` with ``|E| <= gamma |L||U|`` (Higham, Thm 9.3; rounding M's entries adds
        relative errors of the same order, folded into ``gamma = (2N + 4) u``). Then ``log |det|`` moves by ``|log det(I - G)|`` with
        ``G = L^-1 E U^-1``: at most ``S / (1 - S)`` where ``S >= sum |lambda(G)|``, and
        ``S = 1^T |G| 1 <= gamma (|L|^T |L^-1|^T 1) . (|U| |U^-1| 1)`` bounds the nuclear norm.
        Each vector is bounded with a comparison matrix (Higham, Thm 8.12): ``|T^-1| <= C(T)^-1``
        (``C(T)``: ``|t_ii|`` on the diagonal, ``-|t_ij|`` off it) and ``|L| = 2I - C(L)``,
        ``|U| = 2|D| - C(U)``, so ``S <= 4 gamma x . (|D| z)`` with ``C(L)^T x = 1`` and
        ``C(U) z = 1``: two triangular solves with a vector, sums of positive terms (computed to
        a few ulps). ``S < 1`` also keeps the determinant's sign; NaN or a zero pivot fails.
        Rounding ``exp(score - shift)`` moves log Z by at most ``N 750 u`` (the marginals sum
        to N) while every weight is a normal number; a sentence with an arc more than
        :data:`.trust.MAX_GAP` below its word's best (a subnormal or zero weight: the trees
        through it are lost) fails.
        """
        n = self.lu.shape[-1]
        unit = 2.0**-53
        gamma = (2 * n + 4) * unit * 1.01
        limit = (tol - 750 * n * unit) / ((1 + tol) * 4 * gamma)
        # |LU| with the off-diagonal negated: C(L) strictly below, C(U) on and above. The
        # matrix is symmetric, so its transpose's (column-major) layout matches LAPACK's.
        comparison = self.lu.abs() * self.constants.comparison_signs.mT
        ones = self.constants.ones_column.expand(self.lu.shape[0], n, 1)
        lower = torch.linalg.solve_triangular(comparison.mT, ones, upper=True, unitriangular=True)
        upper = torch.linalg.solve_triangular(comparison, ones, upper=True)
        bound = torch.linalg.vecdot((lower * upper).squeeze(-1), self.abs_diag_u)
        certified = bound <= limit
        return certified if self.gap_ok is None else certified & self.gap_ok


def matrix_tree(
    scores: Tensor, lengths: Tensor, *, single_root: bool, tolerance: float = DEFAULT_TOLERANCE,
    padded: bool = True, factorization: Factorization | None = None,
) -> LaplacianFactors:
    """Log partition and marginals of masked float64 ``scores [B, dep, head]`` by LU.

    Differentiable (twice) through torch ops; the max-shift is treated as a constant, which is
    exact because log Z and the marginals do not depend on it. ``tolerance``: the largest
    estimated absolute error of log Z and of each marginal for a sentence to be ``trusted``.
    A sentence with no tree (a word without allowed heads) has a singular Laplacian and is never
    trusted: the caller's exact path returns -inf for it. ``padded=False`` promises that every
    sentence fills the tensor (skips the padding bookkeeping). ``factorization``: the LU of
    these scores when already computed.
    """
    fact = factorization or Factorization(scores, lengths, single_root=single_root, padded=padded)
    constants, weights, lap = fact.constants, fact.weights, fact.lap
    # solved = M^{-T} rhs [B, d, y]: column y + 1 is -B[y, d] (single-root: 0 for word 1's
    # row, which column 0 holds instead: B[1, d]), so that one fused op gives every coefficient
    # u_(d,h)^T B e_d: B[d, d] - B[h, d] for word heads, B[1, d] (single) or B[d, d] for ROOT.
    rhs = constants.rhs[single_root]
    inverse = None
    if lap.requires_grad:  # inv's backward is two products; lu_solve's goes back through the LU
        inverse = torch.linalg.inv_ex(lap)[0]
        solved = inverse.mT @ rhs
    elif fact.solved is not None:  # solved with the factorisation; overwritten below, so taken
        solved, fact.solved = fact.solved, None
    else:
        solved = torch.linalg.lu_solve(fact.lu, fact.pivots, rhs)  # (rhs broadcasts over the batch)
    diag = solved.diagonal(1, dim1=-2, dim2=-1).unsqueeze(-1)  # -B[d, d] (single: 0 for word 1)
    spread = constants.spread[single_root]
    if scores.requires_grad:  # out of place for autograd; the test is not differentiated
        cancelled = torch.linalg.vector_norm(fact.table.detach() * solved.detach(), 1, dim=(-1, -2))
        marginal_rows = weights * torch.addcmul(solved, diag, spread)
        scratch = None
    else:
        # In place: ``table`` is dead after the first term and becomes the test's scratch buffer,
        # ``solved`` becomes the marginals (the inverse is solved again if asked for). Two fewer
        # fresh [B, N, N+1] buffers: on CPU their page faults cost more than the arithmetic.
        scratch = fact.table.mul_(solved)
        fact.table = None
        cancelled = torch.linalg.vector_norm(scratch, 1, dim=(-1, -2))  # |M| * |B^T|, summed
        marginal_rows = solved.addcmul_(diag.clone(), spread).mul_(weights)
        solved = None
    trusted, expected = trust(fact, marginal_rows, cancelled, tol=tolerance, scratch=scratch)
    return LaplacianFactors(weights, solved, fact.log_z, marginal_rows, trusted, expected,
                            single_root=single_root, inverse=inverse, factorization=fact)
