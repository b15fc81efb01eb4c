"""Labeled TreeCRF (one label per arc) against brute-force enumeration of labeled trees."""

from __future__ import annotations

import pytest
import torch

from parser.structs import TreeCRF
from tests.structs.brute_labeled import enumerate_labeled

LENGTHS = torch.tensor([4, 2, 3])
LABELS = 2


def labeled_scores(seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return 1.5 * torch.randn(len(LENGTHS), 5, 5, LABELS, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("single_root", [True, False], ids=["single", "multi"])
def test_labeled_against_enumeration(single_root):
    p_scores, q_scores = labeled_scores(0), labeled_scores(1)
    p = TreeCRF(p_scores, LENGTHS, single_root=single_root)
    q = TreeCRF(q_scores, LENGTHS, single_root=single_root)
    assert p.labeled and p.marginals.shape == p_scores.shape
    entropy, kl = p.entropy(), p.kl(q)
    for b in range(len(LENGTHS)):
        n = int(LENGTHS[b])
        structures, log_w, log_z = enumerate_labeled(p_scores[b], n, single_root=single_root)
        _, q_log_w, q_log_z = enumerate_labeled(q_scores[b], n, single_root=single_root)
        probs, q_probs = (log_w - log_z).exp(), (q_log_w - q_log_z).exp()
        assert p.log_partition[b].item() == pytest.approx(log_z.item(), abs=1e-10)
        marginals = torch.zeros(5, 5, LABELS, dtype=torch.float64)
        for (heads, labels), prob in zip(structures, probs):
            for dep, (head, label) in enumerate(zip(heads, labels), start=1):
                marginals[dep, head, label] += prob
        torch.testing.assert_close(p.marginals[b], marginals, atol=1e-10, rtol=0)
        assert entropy[b].item() == pytest.approx(-(probs * probs.log()).sum().item(), abs=1e-10)
        assert kl[b].item() == pytest.approx((probs * (probs / q_probs).log()).sum().item(), abs=1e-10)
        renyi = (probs**2).sum().log() / (1 - 2)
        assert p.renyi_entropy(2.0)[b].item() == pytest.approx(renyi.item(), abs=1e-10)
        # log_prob of labeled trees, and of unlabeled trees (summed over labels)
        heads, labels = structures[-1]
        row_heads = torch.zeros(len(LENGTHS), 5, dtype=torch.long)
        row_labels = torch.zeros(len(LENGTHS), 5, dtype=torch.long)
        for sentence in range(len(LENGTHS)):
            row_heads[sentence, 1 : int(LENGTHS[sentence]) + 1] = 0
        row_heads[b, 1 : n + 1] = torch.tensor(heads)
        row_labels[b, 1 : n + 1] = torch.tensor(labels)
        if single_root:  # other sentences need a valid tree: a chain 0 <- 1 <- 2 ...
            for sentence in range(len(LENGTHS)):
                if sentence != b:
                    m = int(LENGTHS[sentence])
                    row_heads[sentence, 1 : m + 1] = torch.arange(m)
        got = p.log_prob(row_heads, row_labels)[b]
        assert got.item() == pytest.approx((log_w[-1] - log_z).item(), abs=1e-10)
        same_tree = torch.tensor([h == heads for h, _ in structures])
        unlabeled = torch.logsumexp(log_w[same_tree], 0) - log_z
        assert p.log_prob(row_heads)[b].item() == pytest.approx(unlabeled.item(), abs=1e-10)
    # labeled features: E[f] over labeled arcs equals the dense [B, dep, head, L, F] form
    feats = torch.randn(*p_scores.shape, 3, dtype=torch.float64)
    expected = torch.einsum("bdhlf,bdhl->bf", feats, p.marginals)
    torch.testing.assert_close(p.expect(feats), expected)
    index = torch.cartesian_prod(*(torch.arange(s) for s in feats.shape))
    sparse = p.expect_sparse(index[:, :4], index[:, 4], feats[tuple(index.t())], 3)
    torch.testing.assert_close(sparse, expected, atol=1e-12, rtol=0)
