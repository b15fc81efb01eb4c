"""The trust test's bracket on log Z and its sign test, on the fast path's own quantities: a
log Z moved outside ``[E[score], sum_d logsumexp_h score]`` or a negative marginal must fail."""

from __future__ import annotations

import pytest
import torch

from parser.structs import TreeCRF
from parser.structs.tree.laplacian import Factorization, matrix_tree
from parser.structs.tree.trust import TrustParts, error_terms, term_matrix, trust


def _parts(single_root: bool):
    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(3, 8, 8, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([7, 5, 7])
    masked = TreeCRF(scores, lengths, single_root=single_root)._scores64
    fact = Factorization(masked, lengths, single_root=single_root, padded=True)
    factors = matrix_tree(masked, lengths, single_root=single_root, factorization=fact)
    assert factors.trusted.all()
    # matrix_tree overwrote the Laplacian (its scratch) and the solve (the marginals): both anew
    table = Factorization(masked, lengths, single_root=single_root, padded=True).table
    cancelled = torch.linalg.vector_norm(table * factors.solved, 1, dim=(-1, -2))
    return fact, factors, cancelled


def _verdict(fact, factors, cancelled, *, error=0.0, marginal_rows=None):
    """The trust test with sentence 0's determinant (log_det and log Z) off by ``error``."""
    moved = torch.tensor([error, 0.0, 0.0], dtype=torch.float64)
    log_z, log_det = fact.log_z, fact.log_det
    fact.log_z, fact.log_det = log_z + moved, log_det + moved
    try:
        rows = factors.marginal_rows if marginal_rows is None else marginal_rows
        return trust(fact, rows, cancelled, tol=1e-9)[0]
    finally:
        fact.log_z, fact.log_det = log_z, log_det


@pytest.mark.parametrize("single_root", [True, False])
def test_log_head_functions_is_the_words_log_sum_exps_without_the_shifts(single_root):
    fact, _, _ = _parts(single_root)
    rows = fact.rows  # -inf off arcs and on padding words
    expected = torch.logsumexp(rows, -1).nan_to_num(neginf=0.0).sum(-1) - fact.shift.sum(-1)
    torch.testing.assert_close(fact.log_head_functions, expected)


@pytest.mark.parametrize("single_root", [True, False])
def test_log_z_outside_its_bracket_fails(single_root):
    fact, factors, cancelled = _parts(single_root)
    upper = fact.log_head_functions + fact.shift.sum(-1)  # sum_d logsumexp_h score(h, d)
    expected = (factors.marginal_rows * fact.rows.nan_to_num(neginf=0.0)).sum((-1, -2))
    assert (expected < fact.log_z).all() and (fact.log_z < upper).all()
    assert _verdict(fact, factors, cancelled).all()
    # log Z just past either end of the bracket, sentence 0 alone
    for error in (float(upper[0] - fact.log_z[0]) + 1e-3, float(expected[0] - fact.log_z[0]) - 1e-3):
        assert _verdict(fact, factors, cancelled, error=error).tolist() == [False, True, True]
    for error in (float(upper[0] - fact.log_z[0]) - 1e-3, float(expected[0] - fact.log_z[0]) + 1e-3):
        assert _verdict(fact, factors, cancelled, error=error).tolist() == [True, True, True]


def test_a_negative_marginal_fails_even_when_rows_still_sum_to_one():
    fact, factors, cancelled = _parts(True)
    rows = factors.marginal_rows.clone()
    rows[1, 0, 1] -= 1e-200
    rows[1, 0, 2] += 1e-200  # same row sum; mu[1, 0, 1] may now be negative
    rows[1, 0, 1] = -1e-200
    assert _verdict(fact, factors, cancelled, marginal_rows=rows).tolist() == [True, False, True]


def test_the_batch_evaluates_the_one_sentence_formula():
    """``term_matrix`` is read off ``error_terms``: both give the same terms and verdicts on the
    same parts (random ones, a NaN and a negative determinant among them)."""
    gen = torch.Generator().manual_seed(0)
    parts = torch.randn(64, len(TrustParts._fields), generator=gen, dtype=torch.float64) * 1e-9
    parts[:, 6:8] += 1.0  # row sums near 1
    parts[:, 8] = 1.0  # det sign
    parts[::2, 9] = parts[::2, 9].abs()  # half the smallest marginals >= 0
    parts[3, 8] = -1.0
    parts[5, 2] = float("nan")
    tol = 1e-9
    matrix, offset = term_matrix(7, tol, torch.device("cpu"))
    batched = torch.addmm(offset, parts, matrix)
    singles = torch.tensor([error_terms(TrustParts(*row), n=7, tol=tol) for row in parts.tolist()],
                           dtype=torch.float64)
    clean = ~parts.isnan().any(-1)  # (a NaN part makes every batched term NaN, its own term here)
    torch.testing.assert_close(batched[clean], singles[clean], rtol=1e-12, atol=1e-24)
    verdicts = (batched <= tol).all(-1)
    assert verdicts.tolist() == [all(t <= tol for t in row) for row in singles.tolist()]
    assert 0 < int(verdicts.sum()) < 62 and not verdicts[3] and not verdicts[5]
