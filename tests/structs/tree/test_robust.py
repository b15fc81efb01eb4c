"""Numerical robustness: float32 scores s * N(0, 1), s in {1, 10, 100, 1e3, 1e4}, N in
{10, 50, 150, 250}, one sentence per (s, N) cell, the cells of one N batched together.

log Z must equal the float64 log-space elimination (exact: no cancellation) to float32 rounding,
marginals must be a distribution within 1e-6, and log_prob(argmax()) <= 0.
"""

from __future__ import annotations

import pytest
import torch

from parser.structs import TreeCRF
from parser.structs.tree.elimination import log_partition_by_elimination
from parser.structs.tree.laplacian import Factorization

SCALES = torch.tensor([1.0, 10.0, 100.0, 1e3, 1e4])
GRID = [(10, True), (50, True), (150, True), (250, True), (10, False), (50, False), (150, False)]
IDS = [f"N{n}-{'single' if single else 'multi'}" for n, single in GRID]


@pytest.mark.parametrize(("n", "single_root"), GRID, ids=IDS)
def test_scaled_gaussian_scores(n, single_root):
    gen = torch.Generator().manual_seed(n)
    scores = (SCALES[:, None, None] * torch.randn(5, n + 1, n + 1, generator=gen)).float()
    lengths = torch.tensor([n, n, n, n - 3, n])  # one padded sentence
    crf = TreeCRF(scores, lengths, single_root=single_root)
    log_z, marginals = crf.log_partition, crf.marginals
    assert log_z.dtype == marginals.dtype == torch.float32
    exact = log_partition_by_elimination(crf.arc_scores.double(), lengths, single_root=single_root)
    assert torch.isfinite(log_z).all()
    torch.testing.assert_close(log_z.double(), exact, rtol=2e-7, atol=1e-5)
    assert marginals.min() >= -1e-6 and marginals.max() <= 1 + 1e-6
    real = torch.arange(n + 1)[None, :] <= lengths[:, None]
    real[:, 0] = False
    sums = marginals.double().sum(-1)
    assert ((sums - 1).abs()[real] <= 1e-6).all()
    assert (sums[~real] == 0).all()
    heads = crf.argmax()
    assert (crf.log_prob(heads) <= 0).all()
    if n >= 50:  # the LU path alone would not do: the largest scale is recomputed by elimination
        assert not crf._factors.trusted[4]


@pytest.mark.parametrize(("seed", "index"), [(4, 9), (6, 280)])
def test_peaked_sentence_with_right_marginals_and_wrong_determinant(seed, index):
    """Found by search (about 1 sentence in 2,000 at s = 300, N = 18): LU's marginals pass every
    check while its log Z is off by 50 to 125 nats; only the entropy bounds on log Z catch it."""
    gen = torch.Generator().manual_seed(seed)
    scores = (300.0 * torch.randn(512, 19, 19, generator=gen)).float()[index : index + 1]
    lengths = torch.tensor([18])
    crf = TreeCRF(scores, lengths)
    exact = log_partition_by_elimination(crf.arc_scores.double(), lengths, single_root=True)
    torch.testing.assert_close(crf.log_partition.double(), exact, rtol=2e-7, atol=1e-4)
    assert (crf.log_prob(crf.argmax()) <= 0).all()
    assert not crf._factors.trusted.any()


def _underflowing_sentence() -> torch.Tensor:
    """Found by search (scores x 1000, N = 10): the best tree needs an arc more than 745 nats
    below its word's best, whose shifted weight underflows to 0; the LU then returns, with
    marginals that pass every other check, the distribution over the remaining trees: log Z
    484 nats below the best tree's score."""
    gen = torch.Generator().manual_seed(0)
    return (1000.0 * torch.randn(512, 11, 11, generator=gen)).float()[405:406]


def test_underflowing_weights_send_the_sentence_to_the_exact_path():
    scores, lengths = _underflowing_sentence(), torch.tensor([10])
    scores64 = TreeCRF(scores, lengths)._scores64
    exact = log_partition_by_elimination(scores64, lengths, single_root=True)
    lu = Factorization(scores64, lengths, single_root=True, padded=False)
    assert not lu.gap_ok.any() and float(exact - lu.log_z) > 100  # the case is still one
    ordinary = torch.randn(1, 11, 11, generator=torch.Generator().manual_seed(1))
    for batch in (scores, torch.cat([scores, ordinary]), scores.double()):  # numpy path, torch path
        count = batch.shape[0]
        log_z_alone = TreeCRF(batch, lengths.expand(count)).log_partition  # certificate path
        crf = TreeCRF(batch, lengths.expand(count))
        marginals = crf.marginals
        for value in (log_z_alone[0], crf.log_partition[0]):
            torch.testing.assert_close(value.double(), exact[0], rtol=2e-7, atol=1e-4)
        assert not bool(crf._factors.trusted[0])
        assert (crf.log_prob(crf.argmax()) <= 0).all()
        assert ((marginals[0, 1:].double().sum(-1) - 1).abs() <= 1e-6).all()


def test_the_gap_test_is_skipped_within_the_span_and_exact_beyond():
    scores = torch.randn(2, 6, 6, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    lengths = torch.tensor([5, 3])
    assert TreeCRF(scores, lengths)._lu.gap_ok is None  # range < MAX_GAP: nothing to compute
    for low, expected in ((-706.0, [True, True]), (-710.0, [True, False])):
        # word 2 of sentence 1 gets one arc (from word 3) that far below its best (0); a score
        # of 5 elsewhere puts the range beyond MAX_GAP, so the gaps are computed
        shifted = scores.clone()
        shifted[1, 2] = 0.0
        shifted[1, 2, 3] = low
        shifted[0, 1, 2] = 5.0
        crf = TreeCRF(shifted, lengths)
        assert crf._lu.gap_ok.tolist() == expected
        exact = log_partition_by_elimination(crf._scores64, lengths, single_root=True)
        torch.testing.assert_close(crf.log_partition, exact, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize(("seed", "index"), [(4, 9), (6, 280)])
def test_peaked_sentence_in_a_batch_takes_the_exact_path_too(seed, index):
    """The peaked sentences above beside an ordinary one: the batched (torch) test decides."""
    gen = torch.Generator().manual_seed(seed)
    peaked = (300.0 * torch.randn(512, 19, 19, generator=gen)).float()[index]
    scores, lengths = torch.stack([peaked, torch.randn(19, 19, generator=gen)]), torch.tensor([18, 18])
    crf = TreeCRF(scores, lengths)
    exact = log_partition_by_elimination(crf.arc_scores.double(), lengths, single_root=True)
    torch.testing.assert_close(crf.log_partition.double(), exact, rtol=2e-7, atol=1e-4)
    assert crf._factors.trusted.tolist() == [False, True]
