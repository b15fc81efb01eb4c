"""The trust test's float32 variant (float32 input): ``sum mu log mu`` from the float32 output
marginals, widened by its rounding error, must stay a lower bound of the float64 sum, keep
NaN for negative marginals, and still catch the determinant failures the float64 test catches."""

from __future__ import annotations

import pytest
import torch

from parser.structs import TreeCRF
from parser.structs.log_elimination import log_partition_by_elimination
from parser.structs.lu_trust import plogp_float32


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0, 100.0, 300.0])
def test_float32_sum_mu_log_mu_bounds_the_float64_one_from_below(scale):
    gen = torch.Generator().manual_seed(int(scale * 10))
    n = 40
    scores = scale * torch.randn(16, n + 1, n + 1, generator=gen, dtype=torch.float64)
    lengths = torch.randint(1, n + 1, (16,), generator=gen)
    # (the exact path's marginals can be -1e-300-ish: the bound is about rounding, not sign)
    rows = TreeCRF(scores, lengths, single_root=True).marginals[:, 1:].clamp_min(0.0)
    exact = torch.xlogy(rows, rows).sum((-1, -2))
    bound = plogp_float32(rows.float())
    assert (bound <= exact).all()
    # ... and not much below: the widening is a few float32 ulps per word.
    assert ((exact - bound) <= 2**-21 * (n + (n + 4) * exact.abs())).all()


def test_float32_sum_mu_log_mu_is_nan_for_a_negative_marginal():
    rows = torch.tensor([[[0.0, 0.5, 0.5], [0.0, 1.1, -1e-7]]])
    assert torch.isnan(plogp_float32(rows)).all()
    rows = torch.tensor([[[0.0, 0.5, 0.5], [0.0, 1.0, 0.0]]])  # exact zeros are fine
    assert torch.isfinite(plogp_float32(rows)).all()


@pytest.mark.parametrize(("seed", "index"), [(4, 9), (6, 280)])
def test_batched_float32_test_catches_a_wrong_determinant_with_right_marginals(seed, index):
    """The sentences of test_tree_crf_robust's one-sentence case (log Z off by 50-125 nats,
    marginals right), here beside an ordinary sentence so that the batched test runs."""
    gen = torch.Generator().manual_seed(seed)
    peaked = (300.0 * torch.randn(512, 19, 19, generator=gen)).float()[index]
    ordinary = torch.randn(19, 19, generator=gen)
    scores, lengths = torch.stack([peaked, ordinary]), torch.tensor([18, 18])
    with torch.inference_mode():
        crf = TreeCRF(scores, lengths)
        marginals = crf.marginals
        assert crf._factors.marginals32 is not None
        assert crf._factors.trusted.tolist() == [False, True]
        exact = log_partition_by_elimination(crf.arc_scores.double(), lengths, single_root=True)
        torch.testing.assert_close(crf.log_partition.double(), exact, rtol=2e-7, atol=1e-4)
    reference = TreeCRF(scores.double(), lengths).marginals
    torch.testing.assert_close(marginals.double(), reference, rtol=0, atol=1e-7)


@pytest.mark.parametrize("single_root", [True, False])
def test_float32_marginals_are_the_float64_ones_rounded_where_trusted(single_root):
    gen = torch.Generator().manual_seed(3)
    scores = (torch.tensor([1.0, 10.0, 100.0])[:, None, None] * torch.randn(3, 31, 31, generator=gen))
    lengths = torch.tensor([30, 22, 30])
    with torch.inference_mode():
        crf = TreeCRF(scores.float(), lengths, single_root=single_root)
        marginals = crf.marginals
        trusted = crf._factors.trusted
        fast = crf._factors.marginals32
    assert fast is not None and trusted[:2].all()
    exact = TreeCRF(scores.float().double(), lengths, single_root=single_root)
    reference = exact.marginals
    both = trusted & exact._factors.trusted  # (float64 input has the stricter tolerance)
    assert both[0] and torch.equal(marginals[both], reference.float()[both])
    torch.testing.assert_close(marginals.double(), reference, rtol=0, atol=1e-7)
