"""Entropy gradient of the chain CRF: Mann & McCallum lattices == autograd == Jiao covariance."""

from __future__ import annotations

import pytest
import torch

from parser.structs import LinearChainCRF
from parser.structs.chain.entropy import entropy_gradient_mann_mccallum, entropy_mann_mccallum
from parser.structs.reference.chain import entropy_gradient_jiao, pairwise_feature_covariance
from tests.structs.brute_chain import brute_quantities


def random_scores(seed: int, batch: int, positions: int, states: int, scale: float = 1.5):
    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(
        batch, positions, states, states, generator=generator, dtype=torch.float64
    )


def autograd_gradient(scores, lengths):
    scores = scores.detach().requires_grad_()
    (grad,) = torch.autograd.grad(LinearChainCRF(scores, lengths).entropy().sum(), scores)
    return grad


def test_brute_force_covariance_gives_all_three_gradients():
    scores, lengths = random_scores(0, 4, 4, 3), torch.tensor([4, 1, 3, 2])
    mann_mccallum = entropy_gradient_mann_mccallum(scores, lengths)
    covariance = pairwise_feature_covariance(scores, lengths)
    for b, n in enumerate(lengths.tolist()):
        brute = brute_quantities(scores[b], n)
        torch.testing.assert_close(covariance[b], brute["covariance"], rtol=0, atol=1e-10)
        # dH/dscores = -Cov(f, score): contract the brute covariance with the counted scores
        counted = LinearChainCRF(scores[b : b + 1], lengths[b : b + 1]).mask[0] * scores[b]
        expected = -(brute["covariance"] * counted).sum(dim=(3, 4, 5))
        torch.testing.assert_close(mann_mccallum[b], expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("positions", "states"), [(1, 3), (4, 1), (4, 2), (4, 3), (9, 5)])
def test_mann_mccallum_equals_autograd_equals_jiao(positions, states):
    scores = random_scores(positions * 10 + states, 3, positions, states)
    lengths = torch.tensor([positions, max(1, positions // 2), 1])
    reference = autograd_gradient(scores, lengths)
    torch.testing.assert_close(
        entropy_gradient_mann_mccallum(scores, lengths), reference, rtol=0, atol=1e-8
    )
    torch.testing.assert_close(entropy_gradient_jiao(scores, lengths), reference, rtol=0, atol=1e-8)


def test_gradients_are_exactly_zero_off_the_counted_entries():
    scores, lengths = random_scores(1, 3, 5, 3), torch.tensor([5, 2, 1])
    mask = LinearChainCRF(scores, lengths).mask
    for gradient in (
        entropy_gradient_mann_mccallum(scores, lengths),
        entropy_gradient_jiao(scores, lengths),
    ):
        assert (gradient[~mask] == 0).all()


def test_entropy_lattice_value_and_its_backward():
    scores, lengths = random_scores(2, 3, 6, 4), torch.tensor([6, 3, 1])
    dist = LinearChainCRF(scores, lengths)
    leaf = scores.clone().requires_grad_()
    entropy = entropy_mann_mccallum(leaf, lengths)
    torch.testing.assert_close(entropy, dist.entropy(), rtol=0, atol=1e-10)
    weights = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    (grad,) = torch.autograd.grad((entropy * weights).sum(), leaf)
    expected = weights[:, None, None, None] * autograd_gradient(scores, lengths)
    torch.testing.assert_close(grad, expected, rtol=0, atol=1e-8)


def test_entropy_of_uniform_chain_is_n_log_s_and_is_stationary():
    scores, lengths = torch.zeros(2, 5, 3, 3, dtype=torch.float64), torch.tensor([5, 2])
    expected = lengths.double() * torch.log(torch.tensor(3.0, dtype=torch.float64))
    torch.testing.assert_close(entropy_mann_mccallum(scores, lengths), expected, rtol=0, atol=1e-12)
    assert entropy_gradient_mann_mccallum(scores, lengths).abs().max() < 1e-12


def test_padding_invariance_of_the_gradients():
    scores, lengths = random_scores(3, 3, 6, 3), torch.tensor([6, 4, 2])
    batched = (
        entropy_gradient_mann_mccallum(scores, lengths),
        entropy_gradient_jiao(scores, lengths),
    )
    for b, n in enumerate(lengths.tolist()):
        one = scores[b : b + 1, :n]
        torch.testing.assert_close(
            batched[0][b, :n], entropy_gradient_mann_mccallum(one, lengths[b : b + 1])[0]
        )
        torch.testing.assert_close(
            batched[1][b, :n], entropy_gradient_jiao(one, lengths[b : b + 1])[0]
        )


def test_float32_mann_mccallum_is_close_to_float64():
    scores, lengths = random_scores(4, 2, 20, 5), torch.tensor([20, 7])
    reference = entropy_gradient_mann_mccallum(scores, lengths)
    single = entropy_gradient_mann_mccallum(scores.float(), lengths)
    assert single.dtype == torch.float32
    torch.testing.assert_close(single.double(), reference, rtol=1e-4, atol=1e-5)
