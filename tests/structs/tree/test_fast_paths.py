"""The per-call fast paths: log Z certified from the LU factors alone (no inverse), the
one-sentence trust test computed in Python, the per-size constants; each against the exact
log-space elimination or the batched tensor path."""

from __future__ import annotations

import pytest
import torch

from parser.structs import TreeCRF
from parser.structs.common import arc_mask
from parser.structs.tree.elimination import log_partition_by_elimination
from parser.structs.tree.laplacian import Factorization, _constants, matrix_tree
from parser.structs.tree.trust import TrustParts, error_terms, trust_parts


def _exact(crf: TreeCRF) -> torch.Tensor:
    return log_partition_by_elimination(crf.arc_scores.double(), crf.lengths, single_root=crf.single_root)


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_certificate_holds_on_gaussian_scores_and_is_exact(single_root):
    gen = torch.Generator().manual_seed(0)
    lengths = torch.tensor([1, 2, 7, 12, 20, 20])
    scores = torch.randn(6, 21, 21, generator=gen, dtype=torch.float64)
    crf = TreeCRF(scores, lengths, single_root=single_root)
    lu = Factorization(crf.arc_scores, lengths, single_root=single_root, padded=True)
    certified = lu.log_z_certified(1e-9)
    assert certified.all()  # well-conditioned: no inverse needed
    torch.testing.assert_close(lu.log_z, _exact(crf), rtol=0, atol=1e-10)
    with torch.inference_mode():
        fresh = TreeCRF(scores, lengths, single_root=single_root)
        torch.testing.assert_close(fresh.log_partition, _exact(crf), rtol=0, atol=1e-10)
        assert "_factors" not in fresh.__dict__  # the certified path took no inverse


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_uncertified_sentences_take_the_exact_path_in_a_sub_batch(single_root):
    """Scale 1000 makes LU's Laplacian nearly singular: the certificate must refuse it, and
    log_partition must still equal elimination for every sentence of the mixed batch."""
    gen = torch.Generator().manual_seed(3)
    scale = torch.tensor([1.0, 1000.0, 1.0, 300.0])[:, None, None]
    scores = (scale * torch.randn(4, 31, 31, generator=gen)).float()
    lengths = torch.tensor([30, 30, 17, 25])
    crf = TreeCRF(scores, lengths, single_root=single_root)
    lu = Factorization(crf.arc_scores.double(), lengths, single_root=single_root, padded=True)
    certified = lu.log_z_certified(2e-8)
    assert certified[0] and certified[2] and not certified[1]
    exact = _exact(crf)
    with torch.inference_mode():
        got = TreeCRF(scores, lengths, single_root=single_root).log_partition
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), exact, rtol=2e-7, atol=1e-5)
    # where the certificate says yes, LU's log Z is within its tolerance of the exact one
    assert ((lu.log_z - exact).abs()[certified] <= 2e-8).all()
    # the exact path also runs under inference mode (autograd inside it needs normal tensors)
    features = torch.randn(4, 31, 31, 2, generator=gen, dtype=torch.float64)
    with torch.inference_mode():
        inferred = TreeCRF(scores, lengths, single_root=single_root)
        marginals, cov = inferred.marginals, inferred.covariance(features, features)
    assert not inferred._factors.trusted[1]
    torch.testing.assert_close(marginals, crf.marginals)
    torch.testing.assert_close(cov, crf.covariance(features, features))


def test_certificate_fails_on_nan_and_on_a_sentence_without_trees():
    scores = torch.zeros(2, 4, 4, dtype=torch.float64)
    scores[1, 1:, 0] = float("-inf")  # single root: no word may attach to ROOT
    lengths = torch.tensor([3, 3])
    crf = TreeCRF(scores, lengths)
    lu = Factorization(crf.arc_scores, lengths, single_root=True, padded=False)
    assert lu.log_z_certified(1e-9).tolist() == [True, False]
    assert crf.log_partition[1].item() == float("-inf")
    nan = Factorization(torch.full((1, 4, 4), float("nan"), dtype=torch.float64), torch.tensor([3]),
                        single_root=True, padded=False)
    assert not nan.log_z_certified(1e-9).any()


def _exact_marginals(crf: TreeCRF) -> torch.Tensor:
    scores = crf.arc_scores.double().detach().requires_grad_()
    log_z = log_partition_by_elimination(scores, crf.lengths, single_root=crf.single_root)
    (mu,) = torch.autograd.grad(log_z.sum(), scores)
    return mu


def _decidable(crf: TreeCRF, singles: list[TreeCRF], exact: torch.Tensor, exact_mu: torch.Tensor,
               tol: float) -> torch.Tensor:
    """``[B]`` bool: sentences whose verdict cannot hinge on which LAPACK calls ran. Both paths'
    results are accurate: log Z and each word's marginals (summed absolute error) within ``tol /
    4`` of the exact ones, and every real arc's marginal within half its exact value (so its sign
    is right); and the rounding bound ``eps N cancelled`` is not within a factor 2 of ``tol``.
    The same formula on such results gives the same verdict. Elsewhere it need not: a marginal
    computed with no correct digit (an exact 1e-60 as the difference of two O(1) entries of the
    inverse, times its weight) is rounding noise around 0 whose sign, which the test reads,
    differs between LAPACK calls; and one LU can be less accurate than the other on an
    ill-conditioned Laplacian (a row sum off by 3e-9 in one, 2e-12 in the other: measured)."""
    fact = Factorization(crf._scores64, crf.lengths, single_root=crf.single_root, padded=False)
    factors = matrix_tree(crf._scores64, crf.lengths, single_root=crf.single_root, factorization=fact)
    table = Factorization(crf._scores64, crf.lengths, single_root=crf.single_root, padded=False).table
    cancelled = torch.linalg.vector_norm(table * factors.solved, 1, dim=(-1, -2))
    parts, _ = trust_parts(fact, factors.marginal_rows, cancelled)
    n = crf.scores.shape[-1] - 1
    decidable = []
    for i, row in enumerate(parts.tolist()):
        rounding = error_terms(TrustParts(*row), n=n, tol=tol).rounding
        mask, mu = crf.arc_mask[i], exact_mu[i]
        accurate = True
        for log_z, marginals in ((factors.log_z[i], factors.marginals[i]),
                                 (singles[i]._factors.log_z[0], singles[i]._factors.marginals[0])):
            error = (marginals - mu).abs()
            accurate &= bool(abs(log_z - exact[i]) <= tol / 4) and bool(error.sum(-1).max() <= tol / 4)
            accurate &= bool((error[mask] < mu[mask] / 2).all())
        decidable.append(accurate and not tol / 2 < rounding <= 2 * tol)
    return torch.tensor(decidable)


@pytest.mark.parametrize(("scale", "least_decidable"), [(1.0, 24), (30.0, 3), (100.0, 0), (300.0, 0)])
def test_one_sentence_path_agrees_with_the_batched_test_and_is_exact_where_trusted(scale, least_decidable):
    """B = 1 runs the numpy copy of the fast path (parser.structs.tree.one_sentence), B > 1 the
    tensor one: the same trust test (one formula, :func:`.trust.error_terms`) on quantities
    computed by different LAPACK calls. Both verdicts are sound (every trusted log Z and marginal
    is within the tolerance of the exact elimination), and they agree wherever both LU results
    are accurate enough that the verdict cannot hinge on rounding (:func:`_decidable`). At
    scales 100 and 300 no sentence is (each has marginals computed with no correct digit; over
    50 seeds the verdicts differed on 82 of 1200 sentences at scale 100, none at 300; at scale 30
    on 120, none of them decidable): there soundness is the property."""
    gen = torch.Generator().manual_seed(int(scale))
    n, tol = 12, 1e-9
    scores = scale * torch.randn(24, n + 1, n + 1, generator=gen, dtype=torch.float64)
    lengths = torch.full((24,), n)
    crf = TreeCRF(scores, lengths)
    batched = crf._factors.trusted
    singles = [TreeCRF(scores[i : i + 1], lengths[i : i + 1]) for i in range(24)]
    single = torch.tensor([one._factors.all_trusted for one in singles])
    exact, exact_mu = _exact(crf), _exact_marginals(crf)
    decidable = _decidable(crf, singles, exact, exact_mu, tol)
    assert decidable.sum() >= least_decidable
    assert torch.equal(batched[decidable], single[decidable])
    if scale == 1.0:
        assert single.all() and batched.all() and decidable.all()
    # soundness: whatever each path trusted is exact to the tolerance
    factors = crf._factors
    for i, one in enumerate(singles):
        if batched[i]:
            assert abs(float(factors.log_z[i] - exact[i])) <= tol
            assert float((factors.marginals[i] - exact_mu[i]).abs().max()) <= tol
        if single[i]:
            assert abs(float(one._factors.log_z[0] - exact[i])) <= tol
            assert float((one._factors.marginals[0] - exact_mu[i]).abs().max()) <= tol
        # every one-at-a-time log Z is exact, whichever path it took
        torch.testing.assert_close(one.log_partition, exact[i : i + 1], rtol=1e-12, atol=1e-9)


def test_per_size_constants_are_views_of_one_growing_allocation():
    small, large = _constants(5, torch.device("cpu")), _constants(300, torch.device("cpu"))
    again = _constants(5, torch.device("cpu"))
    assert again is small
    assert small.rhs[True].tolist() == [[1, 0, 0, 0, 0], [0, 0, -1, 0, 0], [0, 0, 0, -1, 0], [0, 0, 0, 0, -1]]
    assert small.rhs[False][:, 0].abs().sum() == 0 and torch.equal(small.rhs[False][:, 1:], -torch.eye(4, dtype=torch.float64))
    assert large.rhs[True].shape == (299, 300)
    lengths = torch.tensor([4, 2])
    positions = torch.arange(5)
    heads = positions <= lengths[:, None]
    expected = heads[:, :, None] & heads[:, None, :] & ~torch.eye(5, dtype=torch.bool)
    expected[:, 0] = False
    assert torch.equal(arc_mask(lengths, 5), expected)
    assert torch.equal(arc_mask(torch.tensor([4, 4]), 5, padded=False), expected[:1].expand(2, 5, 5))


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_factor_and_solve_in_one_call_equals_factor_then_solve(single_root):
    """The marginals' route factors and solves in one LAPACK call; log Z first (the certified
    route) factors alone and solves later: the same factors, the same solve, the same bits."""
    gen = torch.Generator().manual_seed(5)
    scores = torch.randn(5, 13, 13, generator=gen, dtype=torch.float64) * torch.tensor([1.0, 3, 10, 1, 30])[:, None, None]
    lengths = torch.tensor([12, 1, 7, 12, 9])
    fused = TreeCRF(scores, lengths, single_root=single_root)
    marginals = fused.marginals  # first: factor and solve together
    assert fused._lu.lu is not None and fused._lu.solved is None  # (consumed by the marginals)
    separate = TreeCRF(scores, lengths, single_root=single_root)
    log_z = separate.log_partition  # first: the LU alone, then lu_solve for the marginals
    assert torch.equal(separate.marginals, marginals)
    assert torch.equal(fused.log_partition, log_z)
    lu = Factorization(fused.arc_scores, lengths, single_root=single_root, padded=True, solve=True)
    plain = Factorization(fused.arc_scores, lengths, single_root=single_root, padded=True)
    assert torch.equal(lu.lu, plain.lu) and torch.equal(lu.pivots, plain.pivots)
    solved = torch.linalg.lu_solve(plain.lu, plain.pivots, _constants(13, scores.device).rhs[single_root])
    assert torch.equal(lu.solved, solved)
