"""Bad input to the chain CRF raises ValueError naming the tensor and the value."""

from __future__ import annotations

import pytest
import torch

from parser.structs import LinearChainCRF
from parser.structs.chain.entropy import entropy_gradient_mann_mccallum
from parser.structs.reference.chain import entropy_gradient_jiao


def test_scores_shape_dtype_and_values_are_checked():
    lengths = torch.tensor([2])
    with pytest.raises(ValueError, match=r"scores must be \[B, T, S, S\].*\(1, 2, 3\)"):
        LinearChainCRF(torch.zeros(1, 2, 3), lengths)
    with pytest.raises(ValueError, match=r"scores must be \[B, T, S, S\].*\(1, 2, 3, 2\)"):
        LinearChainCRF(torch.zeros(1, 2, 3, 2), lengths)
    with pytest.raises(ValueError, match="floating point"):
        LinearChainCRF(torch.zeros(1, 2, 3, 3, dtype=torch.long), lengths)
    scores = torch.zeros(1, 2, 3, 3)
    scores[0, 1, 2, 0] = float("-inf")
    with pytest.raises(ValueError, match=r"scores\[0, 1, 2, 0\] = -inf is not finite"):
        LinearChainCRF(scores, lengths)
    with pytest.raises(ValueError, match=r"scores\[0, 1, 2, 0\]"):
        entropy_gradient_mann_mccallum(scores, lengths)


def test_lengths_are_checked():
    scores = torch.zeros(2, 3, 2, 2)
    with pytest.raises(ValueError, match=r"lengths must be \[B\] with B=2"):
        LinearChainCRF(scores, torch.tensor([3]))
    with pytest.raises(ValueError, match="integer"):
        LinearChainCRF(scores, torch.tensor([3.0, 1.0]))
    with pytest.raises(ValueError, match=r"lengths\[1\] = 0 is outside 1..3"):
        LinearChainCRF(scores, torch.tensor([3, 0]))
    with pytest.raises(ValueError, match=r"lengths\[0\] = 4 is outside 1..3"):
        entropy_gradient_jiao(scores, torch.tensor([4, 1]))


def test_tags_features_and_other_are_checked():
    dist = LinearChainCRF(torch.zeros(2, 3, 2, 2), torch.tensor([3, 1]))
    with pytest.raises(ValueError, match=r"tags must be \[\.\.\., 2, 3\]"):
        dist.log_prob(torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tags\[0, 2\] = 2 is outside 0..1"):
        dist.log_prob(torch.tensor([[0, 1, 2], [1, 7, 7]]))
    with pytest.raises(ValueError, match=r"features must be \[2, 3, 2, 2, F\]"):
        dist.expect(torch.zeros(2, 3, 2, 2))
    with pytest.raises(ValueError, match="same scores shape and lengths"):
        dist.kl(LinearChainCRF(torch.zeros(2, 3, 2, 2), torch.tensor([3, 2])))
    with pytest.raises(ValueError, match="n must be a positive int"):
        dist.sample(0)
