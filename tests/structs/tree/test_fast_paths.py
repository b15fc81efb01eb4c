"""The per-call fast paths: log Z certified from the LU factors alone (no inverse), the
one-sentence trust test computed in Python, the per-size constants; each against the exact
log-space elimination or the batched tensor path."""

from __future__ import annotations

import pytest
import torch

from parser.structs import TreeCRF
from parser.structs.common import arc_mask
from parser.structs.tree.elimination import log_partition_by_elimination
from parser.structs.tree.laplacian import Factorization, _constants


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


@pytest.mark.parametrize("scale", [1.0, 30.0, 100.0, 300.0])
def test_one_sentence_path_agrees_with_the_batched_test_and_is_exact_where_trusted(scale):
    """B = 1 runs the numpy copy of the fast path (parser.structs.tree.one_sentence), B > 1 the
    tensor one: different LAPACK calls, so borderline verdicts may differ, but rarely, and
    every trusted result is within the tolerance of the exact elimination."""
    gen = torch.Generator().manual_seed(int(scale))
    n = 12
    scores = scale * torch.randn(24, n + 1, n + 1, generator=gen, dtype=torch.float64)
    lengths = torch.full((24,), n)
    batched = TreeCRF(scores, lengths)._factors.trusted
    singles = [TreeCRF(scores[i : i + 1], lengths[i : i + 1]) for i in range(24)]
    single = torch.tensor([crf._factors.all_trusted for crf in singles])
    assert (batched == single).sum() >= 21
    if scale == 1.0:
        assert single.all()
    exact = _exact(TreeCRF(scores, lengths))
    for i, crf in enumerate(singles):  # every one-at-a-time log Z is exact, whichever path it took
        torch.testing.assert_close(crf.log_partition, exact[i : i + 1], rtol=1e-12, atol=1e-9)
        if single[i]:
            torch.testing.assert_close(crf._factors.log_z, exact[i : i + 1], rtol=0, atol=1e-9)


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
