"""TreeCRF against brute-force enumeration of all trees (N <= 5), single and multi root."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import kl_divergence

from parser.structs import TreeCRF
from tests.structs.brute import enumerate_distribution, heads_tensor

LENGTHS = torch.tensor([5, 3, 4, 1])


def random_scores(seed: int, *, scale: float = 2.0, size: int = 5) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return scale * torch.randn(len(LENGTHS), size + 1, size + 1, generator=gen, dtype=torch.float64)


def brute(scores, b, single_root):
    """(trees, probabilities [T], log Z, arc indicator matrices [T, N+1, N+1]) of sentence b."""
    n = int(LENGTHS[b])
    trees, log_weights, log_z = enumerate_distribution(scores[b], n, single_root=single_root)
    size = scores.shape[-1]
    arcs = torch.zeros(len(trees), size, size, dtype=torch.float64)
    for t, tree in enumerate(trees):
        for dep, head in enumerate(tree, start=1):
            arcs[t, dep, head] = 1.0
    return trees, (log_weights - log_z).exp(), log_z, arcs


@pytest.fixture(params=[True, False], ids=["single", "multi"])
def single_root(request):
    return request.param


def test_log_partition_marginals_log_prob(single_root):
    scores = random_scores(0)
    crf = TreeCRF(scores, LENGTHS, single_root=single_root)
    for b in range(len(LENGTHS)):
        trees, probs, log_z, arcs = brute(scores, b, single_root)
        assert crf.log_partition[b].item() == pytest.approx(log_z.item(), abs=1e-10)
        expected = torch.einsum("t,tdh->dh", probs, arcs)
        torch.testing.assert_close(crf.marginals[b], expected, atol=1e-10, rtol=0)
        heads = torch.stack([heads_tensor(t, scores.shape[-1]) for t in trees])
        batch = torch.zeros(len(trees), dtype=torch.long) + b
        sub = TreeCRF(scores[batch], LENGTHS[batch], single_root=single_root)
        torch.testing.assert_close(sub.log_prob(heads), probs.log(), atol=1e-10, rtol=0)
    # padding, row 0 and the diagonal are exactly zero
    assert (crf.marginals[:, 0] == 0).all()
    assert (torch.diagonal(crf.marginals, dim1=1, dim2=2) == 0).all()
    assert (crf.marginals[1, 4:] == 0).all() and (crf.marginals[1, :, 4:] == 0).all()


def test_entropy_renyi_kl(single_root):
    p_scores, q_scores = random_scores(1), random_scores(2)
    p = TreeCRF(p_scores, LENGTHS, single_root=single_root)
    q = TreeCRF(q_scores, LENGTHS, single_root=single_root)
    entropy, kl = p.entropy(), kl_divergence(p, q)
    torch.testing.assert_close(kl, p.kl(q), atol=0, rtol=0)
    for b in range(len(LENGTHS)):
        _, probs, _, _ = brute(p_scores, b, single_root)
        _, q_probs, _, _ = brute(q_scores, b, single_root)
        assert entropy[b].item() == pytest.approx(-(probs * probs.log()).sum().item(), abs=1e-10)
        assert kl[b].item() == pytest.approx((probs * (probs / q_probs).log()).sum().item(), abs=1e-10)
        cross = -(probs * q_probs.log()).sum().item()
        assert p.cross_entropy(q)[b].item() == pytest.approx(cross, abs=1e-10)
        for alpha in (0.5, 2.0, 3.0):
            renyi = (probs**alpha).sum().log() / (1 - alpha)
            assert p.renyi_entropy(alpha)[b].item() == pytest.approx(renyi.item(), abs=1e-10)
    torch.testing.assert_close(p.renyi_entropy(1.0), entropy)


def test_expect_dense_sparse_covariance_pairwise(single_root):
    scores = random_scores(3)
    crf = TreeCRF(scores, LENGTHS, single_root=single_root)
    gen = torch.Generator().manual_seed(4)
    first = torch.randn(*scores.shape, 3, generator=gen, dtype=torch.float64)
    second = torch.randn(*scores.shape, 2, generator=gen, dtype=torch.float64)
    expect, cov, pair = crf.expect(first), crf.covariance(first, second), crf.pairwise_marginals()
    for b in range(len(LENGTHS)):
        _, probs, _, arcs = brute(scores, b, single_root)
        f = torch.einsum("tdh,dhr->tr", arcs, first[b])
        g = torch.einsum("tdh,dhs->ts", arcs, second[b])
        torch.testing.assert_close(expect[b], probs @ f, atol=1e-10, rtol=0)
        mean_f, mean_g = probs @ f, probs @ g
        brute_cov = torch.einsum("t,tr,ts->rs", probs, f - mean_f, g - mean_g)
        torch.testing.assert_close(cov[b], brute_cov, atol=1e-10, rtol=0)
        brute_pair = torch.einsum("t,tij,tkl->ijkl", probs, arcs, arcs)
        torch.testing.assert_close(pair[b], brute_pair, atol=1e-10, rtol=0)
    # sparse form: every (b, dep, head, feature) entry of `first`, duplicates split in halves
    index = torch.cartesian_prod(*(torch.arange(s) for s in first.shape))
    values = first[tuple(index.t())]
    arc_index = torch.cat([index[:, :3], index[:, :3]])
    feature_ids = torch.cat([index[:, 3], index[:, 3]])
    sparse = crf.expect_sparse(arc_index, feature_ids, torch.cat([values, values]) / 2, 3)
    torch.testing.assert_close(sparse, expect, atol=1e-12, rtol=0)
