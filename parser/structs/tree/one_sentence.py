"""The LU fast path of :mod:`.laplacian` for one unpadded sentence on the CPU without autograd.

Same mathematics and the same trust test (:func:`.trust.error_terms` on the same
:class:`.trust.TrustParts`), but in numpy on views of the tensors: a call is ~20 elementwise
operations around two LAPACK calls (slogdet, solve), and at sentence sizes a numpy operation
costs ~1 us where a torch one costs several (more again when numpy and torch calls alternate).
This is what one-sentence-at-a-time use pays per call (a parsing server; the TACL paper's
Table 1). Batches stay in torch; tests compare the two paths.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from parser.structs import common
from parser.structs.tree import laplacian
from parser.structs.tree.trust import SMALLEST_NORMAL, TrustParts, error_terms

__all__ = ["one_sentence_factors"]

# The reductions as ufunc methods called from here (ndarray.sum & co. go through numpy's Python
# wrappers, whose warnings the filter below would not catch).
_sum, _max, _min = np.add.reduce, np.maximum.reduce, np.minimum.reduce

# numpy warns on a singular or overflowing sentence (divide by zero in slogdet, invalid values in
# solve); such a sentence fails the trust test and takes the exact path, so the warning says
# nothing to the user. Filtered for this module only (np.errstate would cost more than the call).
warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"parser\.structs\.tree\.one_sentence")

try:  # numpy's LAPACK gufuncs themselves: the public wrappers' checks cost ~8 us a call here,
    # and this path checks its input itself (finite weights; the sign before solving).
    from numpy.linalg import _umath_linalg

    def _slogdet(a: np.ndarray) -> tuple[float, float]:
        return _umath_linalg.slogdet(a, signature="d->dd")

    def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return _umath_linalg.solve(a, b, signature="dd->d")
except (ImportError, AttributeError):  # another numpy layout: the public functions
    _slogdet, _solve = np.linalg.slogdet, np.linalg.solve


@lru_cache(maxsize=512)
def _layout(n: int, single_root: bool) -> tuple[np.ndarray, ...]:
    """Read-only numpy views of :mod:`.laplacian`'s constants for ``n`` words (one source for the
    sign conventions): the off-arc penalty's word rows ``[N, N+1]`` (0, -inf on the diagonal
    arcs), head signs ``[N+1]``, flat indices of ``M[d, d]`` in ``[N, N+1]``, the solve's
    right-hand side ``[N, N+1]`` (contiguous, for LAPACK) and the spread ``[N+1]``."""
    cpu = torch.device("cpu")
    constants = laplacian._constants(n + 1, cpu)
    words = np.arange(n)
    layout = (
        common.off_arc_penalty(n + 1, torch.float64, cpu).numpy()[1:],
        constants.head_signs.numpy(),
        words * (n + 1) + words + 1,
        np.ascontiguousarray(constants.rhs[single_root].numpy()),
        constants.spread[single_root].numpy(),
    )
    for array in layout:
        array.flags.writeable = False
    return layout


def one_sentence_factors(scores: Tensor, *, single_root: bool, tol: float):
    """``(weight_rows, solved, log_z, marginal_rows, trusted, expected score)`` for ``scores [1, N+1,
    N+1]`` (one sentence filling the tensor, unmasked: row 0 and the diagonal are ignored), as
    :func:`.laplacian.matrix_tree` computes them (float64 tensors with a batch dimension of 1;
    ``trusted`` a Python bool). CPU, no autograd."""
    n = scores.shape[-1] - 1
    penalty, head_signs, diagonal, rhs, spread = _layout(n, single_root)
    raw = scores.detach().numpy()[0, 1:]
    rows = (raw if raw.dtype == np.float64 else raw.astype(np.float64)) + penalty  # [dep, head]
    shift = _max(rows, 1)
    shift_total = _sum(shift, None)
    if not np.isfinite(shift_total):  # a word without allowed heads (or NaN): no LU, exact path
        nan_rows = torch.full((1, n, n + 1), float("nan"), dtype=torch.float64)
        nan = torch.full((1,), float("nan"), dtype=torch.float64)
        return nan_rows, nan_rows, nan, nan_rows, False, nan
    weights = rows - shift[:, None]
    _in_place(np.exp, torch.exp, weights)
    incoming = _sum(weights[:, 1:], 1)
    if not single_root:
        incoming += weights[:, 0]
    table = weights * head_signs  # column h + 1: word h's column of M; column 0: ROOT weights
    table.flat[diagonal] = incoming
    if single_root:
        table[:, 1] = weights[:, 0]  # Koo et al.: word 1's column := ROOT's
    lap = table[:, 1:]
    # LU of M^T, as torch's path and the solve below: M is row diagonally dominant (but for
    # single root's word-1 column), so M^T's partial pivoting keeps the growth small, which
    # the trust test's rounding bound assumes (M's own LU: log Z off by 5e-7, trusted; measured).
    sign, log_det = _slogdet(lap.T)  # two LAPACK calls cost less than torch's LU + solve
    if not sign > 0:  # no tree (a word without heads), or rounding flipped the sign: exact path
        solved = np.full_like(rhs, np.nan)
    else:
        solved = _solve(lap.T, rhs)  # M^{-T} rhs, as in matrix_tree
    log_z = log_det + shift_total
    marginal_rows = solved + solved.flat[diagonal][:, None] * spread
    marginal_rows *= weights
    finite = rows
    off_arcs = finite == -np.inf
    # No real arc more than MAX_GAP below its word's best (weight subnormal or 0; see .trust): the
    # weights below the smallest normal number are exactly the off arcs'. (Two counts cost less
    # than a masked minimum per row.)
    gap_ok = int(np.count_nonzero(weights < SMALLEST_NORMAL)) == int(np.count_nonzero(off_arcs))
    np.copyto(finite, 0.0, where=off_arcs)
    expected = np.vdot(marginal_rows, finite)
    # sum_d log sum_h w(h, d), ROOT included (single root: ``incoming`` left it out)
    totals = incoming + weights[:, 0] if single_root else incoming
    log_head_functions = _sum(np.log(totals), None)
    # Large arrays: reuse ``table`` as scratch (a fresh one costs page faults on first touch).
    np.multiply(table, solved, out=table)
    cancelled = _sum(np.abs(table, out=table), None)
    score_size = _sum(np.abs(finite, out=table), None)
    sums = _sum(marginal_rows, 1)
    # A NaN anywhere reaches a term (min/max propagate it) and fails its comparison.
    parts = TrustParts(float(cancelled), float(log_z), float(expected), float(score_size), float(log_det),
                       float(log_head_functions), float(_min(sums, 0)), float(_max(sums, 0)), float(sign),
                       float(_min(marginal_rows, None)))
    trusted = gap_ok and all(term <= tol for term in error_terms(parts, n=n, tol=tol))  # NaN fails
    return (torch.from_numpy(weights[None]), torch.from_numpy(solved[None]),
            torch.from_numpy(np.array([log_z])), torch.from_numpy(marginal_rows[None]), trusted,
            torch.from_numpy(np.array([expected])))


def _in_place(numpy_op, torch_op, array: np.ndarray) -> np.ndarray:
    """``array = op(array)``: numpy's exp/log are scalar loops here, torch's vectorised but
    dearer to call; the switch is at ~4,000 elements (measured inside a one-sentence call, where a torch
    op costs more than alone)."""
    if array.size < 4096:
        return numpy_op(array, out=array)
    view = torch.from_numpy(array)
    torch_op(view, out=view)
    return array
