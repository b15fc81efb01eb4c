"""The slow published baselines against brute force (n <= 5) and against each other (n up to 30)."""

from __future__ import annotations

import pytest
import torch

from parser.structs.reference import tree as slow
from tests.structs.brute import enumerate_distribution

INF = float("inf")


def brute(scores: torch.Tensor, n: int, *, single_root: bool):
    """-> ``(p [T], indicators [T, M, M], log_z)`` over every tree of the padded sentence."""
    trees, log_weights, log_z = enumerate_distribution(scores, n, single_root=single_root)
    p = torch.exp(log_weights - log_z)
    size = scores.shape[0]
    indicators = torch.zeros(len(trees), size, size, dtype=torch.float64)
    rows = torch.arange(len(trees))[:, None]
    indicators[rows, torch.arange(1, n + 1)[None, :], torch.tensor(trees)] = 1.0
    return p, indicators, log_z


def sentence(n: int, seed: int, *, size: int | None = None, scale: float = 1.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    size = size or n + 1
    scores = torch.zeros(size, size, dtype=torch.float64)
    block = scale * torch.randn(n + 1, n + 1, generator=generator, dtype=torch.float64)
    block[torch.rand(n + 1, n + 1, generator=generator) < 0.15] = -INF
    block[1:, 0] = torch.randn(n, generator=generator, dtype=torch.float64)  # keep root arcs
    scores[: n + 1, : n + 1] = block
    return scores


CASES = [
    (n, seed, single_root) for n in (1, 3, 5) for seed in (0, 1) for single_root in (False, True)
]


@pytest.mark.parametrize("n, seed, single_root", CASES)
def test_against_brute_force(n, seed, single_root):
    scores = sentence(n, seed, size=n + 2)  # one padding position
    p, ind, log_z = brute(scores, n, single_root=single_root)
    marginals = torch.einsum("t,tab->ab", p, ind)
    pairs = torch.einsum("t,tab,tcd->abcd", p, ind, ind)
    entropy = -(p[p > 0] * p[p > 0].log()).sum()

    got_log_z = slow.matrix_tree_log_partition(scores, n, single_root=single_root)
    assert torch.allclose(got_log_z, log_z, atol=1e-10)
    assert torch.allclose(
        slow.matrix_tree_marginals(scores, n, single_root=single_root), marginals, atol=1e-10
    )
    assert torch.allclose(
        slow.smith_eisner_entropy(scores, n, single_root=single_root), entropy, atol=1e-10
    )
    ds_pairs = slow.druck_smith_pairwise_marginals(scores, n, single_root=single_root)
    assert ds_pairs.shape == (n + 2,) * 4
    assert torch.allclose(ds_pairs, pairs, atol=1e-10)
    conditioned = slow.two_edge_marginals_by_conditioning(scores, n, single_root=single_root)
    assert torch.allclose(conditioned, pairs, atol=1e-10)

    generator = torch.Generator().manual_seed(100 + seed)
    r = torch.randn(n + 2, n + 2, 3, generator=generator, dtype=torch.float64)
    s = torch.randn(n + 2, n + 2, 2, generator=generator, dtype=torch.float64)
    r_tree = torch.einsum("tab,abr->tr", ind, r)  # feature totals per tree
    s_tree = torch.einsum("tab,abs->ts", ind, s)
    mean_r, mean_s = p @ r_tree, p @ s_tree
    covariance = torch.einsum("t,tr,ts->rs", p, r_tree - mean_r, s_tree - mean_s)
    got = slow.druck_smith_covariance(scores, n, r, s, single_root=single_root)
    assert torch.allclose(got, covariance, atol=1e-10)


@pytest.mark.parametrize("single_root", [False, True])
def test_ge_gradient_matches_autograd_on_brute_force(single_root):
    n = 4
    scores = sentence(n, 3, size=n + 1)
    generator = torch.Generator().manual_seed(5)
    features = (torch.rand(n + 1, n + 1, 4, generator=generator) < 0.4).double()
    targets = torch.rand(4, generator=generator, dtype=torch.float64) * n
    leaf = scores.clone().requires_grad_(True)
    _, log_weights, log_z = enumerate_distribution(leaf, n, single_root=single_root)
    p = torch.exp(log_weights - log_z)
    _, ind, _ = brute(scores, n, single_root=single_root)
    expected = p @ torch.einsum("tab,abf->tf", ind, features)
    ((targets - expected) ** 2).sum().backward()
    reference = torch.nan_to_num(leaf.grad, nan=0.0)
    got = slow.ge_gradient_by_covariance(scores, n, features, targets, single_root=single_root)
    assert torch.allclose(got, reference, atol=1e-10)
    assert got.abs().max() > 1e-3


@pytest.mark.parametrize("single_root", [False, True])
def test_consistency_on_longer_sentences(single_root):
    n = 30
    scores = sentence(n, 7, size=n + 3, scale=3.0)
    marginals = slow.matrix_tree_marginals(scores, n, single_root=single_root)
    assert torch.allclose(
        marginals[1 : n + 1].sum(-1), torch.ones(n, dtype=torch.float64), atol=1e-9
    )
    assert (marginals[0] == 0).all() and (marginals[n + 1 :] == 0).all()
    assert (marginals[:, n + 1 :] == 0).all()

    # H = log Z - E[score] with E[score] from the marginals (first-order expectation).
    log_z = slow.matrix_tree_log_partition(scores, n, single_root=single_root)
    finite = torch.isfinite(scores)
    expected_score = (marginals * torch.where(finite, scores, 0.0)).sum()
    entropy = slow.smith_eisner_entropy(scores, n, single_root=single_root)
    assert torch.allclose(entropy, log_z - expected_score, atol=1e-8)
    assert entropy > 0

    pairs = slow.druck_smith_pairwise_marginals(scores, n, single_root=single_root)
    real = slice(1, n + 1)
    # Summing out the second arc's head gives the first arc's marginal (for every other dep).
    over_head = pairs[real, :, real, :].sum(-1)  # [d1, h1, d2]
    target = marginals[real, :, None].expand_as(over_head)
    assert torch.allclose(over_head, target, atol=1e-9)
    assert torch.allclose(pairs, pairs.permute(2, 3, 0, 1), atol=1e-12)
    assert pairs.min() > -1e-9 and pairs.max() < 1 + 1e-9


@pytest.mark.parametrize("single_root", [False, True])
def test_conditioning_agrees_with_druck_smith(single_root):
    n = 18  # (n+1)^2 matrix-tree calls: the O(n^5) baseline is slow by design
    scores = sentence(n, 8, size=n + 2, scale=3.0)
    pairs = slow.druck_smith_pairwise_marginals(scores, n, single_root=single_root)
    conditioned = slow.two_edge_marginals_by_conditioning(scores, n, single_root=single_root)
    assert torch.allclose(conditioned, pairs, atol=1e-9)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="scores"):
        slow.matrix_tree_log_partition(torch.zeros(2, 3, 3), 2, single_root=True)
    with pytest.raises(ValueError, match="n:"):
        slow.matrix_tree_marginals(torch.zeros(3, 3), 3, single_root=True)
    nan = torch.zeros(4, 4)
    nan[1, 2] = float("nan")
    with pytest.raises(ValueError, match=r"dep=1, head=2"):
        slow.smith_eisner_entropy(nan, 3, single_root=False)
    no_tree = torch.zeros(4, 4)
    no_tree[2] = -INF
    with pytest.raises(ValueError, match="no spanning tree"):
        slow.matrix_tree_marginals(no_tree, 3, single_root=True)
    assert slow.matrix_tree_log_partition(no_tree, 3, single_root=False) == -INF
