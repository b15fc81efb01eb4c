"""``TreeCRF.arc_pair_marginals``: chosen entries of the pairwise arc marginals against brute-force
enumeration (both root constraints, both paths), the full ``pairwise_marginals`` on larger
sentences, padding invariance and gradients."""

from __future__ import annotations

import itertools

import pytest
import torch

from parser.structs import TreeCRF
from parser.structs.tree.elimination import arc_pair_marginals_by_elimination
from tests.structs.brute import enumerate_distribution


def brute_pairs(scores: torch.Tensor, n: int, *, single_root: bool) -> torch.Tensor:
    """``[i, j, k, l]`` p(head(i) = j, head(k) = l) of one sentence by enumeration."""
    trees, log_weights, log_z = enumerate_distribution(scores, n, single_root=single_root)
    size = scores.shape[-1]
    pair = torch.zeros(size, size, size, size, dtype=torch.float64)
    for tree, log_weight in zip(trees, log_weights):
        p = torch.exp(log_weight - log_z)
        arcs = [(d, h) for d, h in enumerate(tree, start=1)]
        for (i, j), (k, l) in itertools.product(arcs, arcs):
            pair[i, j, k, l] += p
    return pair


def all_arc_pairs(n: int, b: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    arcs = [(b, d, h) for d in range(1, n + 1) for h in range(n + 1)]
    pairs = list(itertools.product(arcs, arcs))
    return torch.tensor([p[0] for p in pairs]), torch.tensor([p[1] for p in pairs])


@pytest.mark.parametrize("single_root", [False, True])
def test_matches_brute_force(single_root):
    n = 4
    gen = torch.Generator().manual_seed(4)
    scores = torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
    scores[0, 2, 3] = float("-inf")  # a forbidden arc: its pairs are 0
    crf = TreeCRF(scores, torch.tensor([n]), single_root=single_root)
    first, second = all_arc_pairs(n)
    got = crf.arc_pair_marginals(first, second)
    expected = brute_pairs(scores[0], n, single_root=single_root)[first[:, 1], first[:, 2], second[:, 1], second[:, 2]]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


def test_exact_path_matches_brute_force():
    """Planted peaks (N = 5, seed 4, scale 60: the sentence of the second-order fallback tests)
    that the LU trust test rejects, in a batch beside a trusted sentence."""
    n = 5
    gen = torch.Generator().manual_seed(4)
    peaked = 60 * torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
    calm = torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
    crf = TreeCRF(torch.cat([calm, peaked]), torch.tensor([n, n]))
    assert crf._factors.trusted.tolist() == [True, False]
    for b, scores in enumerate((calm, peaked)):
        first, second = all_arc_pairs(n, b)
        expected = brute_pairs(scores[0], n, single_root=True)[first[:, 1], first[:, 2], second[:, 1], second[:, 2]]
        torch.testing.assert_close(crf.arc_pair_marginals(first, second), expected, rtol=0, atol=1e-10)


def test_elimination_multi_root_matches_brute_force():
    n = 4
    gen = torch.Generator().manual_seed(2)
    scores = 3 * torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
    scores[0, :, :].fill_diagonal_(float("-inf"))
    scores[0, 0, :] = float("-inf")
    first, second = all_arc_pairs(n)
    got = arc_pair_marginals_by_elimination(scores, torch.tensor([n]), first, second, single_root=False)
    expected = brute_pairs(scores[0], n, single_root=False)[first[:, 1], first[:, 2], second[:, 1], second[:, 2]]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


def test_equals_full_pairwise_marginals_in_a_padded_batch():
    gen = torch.Generator().manual_seed(9)
    lengths = torch.tensor([12, 5, 9])
    scores = 2 * torch.randn(3, 13, 13, generator=gen, dtype=torch.float64)
    crf = TreeCRF(scores, lengths)
    full = crf.pairwise_marginals()
    rows = []
    for b, n in enumerate(lengths.tolist()):
        for _ in range(40):
            i, k = torch.randint(1, n + 1, (2,), generator=gen).tolist()
            j, l = torch.randint(0, n + 1, (2,), generator=gen).tolist()
            rows.append(((b, i, j), (b, k, l)))
    first = torch.tensor([r[0] for r in rows])
    second = torch.tensor([r[1] for r in rows])
    got = crf.arc_pair_marginals(first, second)
    torch.testing.assert_close(got, full[first[:, 0], first[:, 1], first[:, 2], second[:, 1], second[:, 2]],
                               rtol=0, atol=1e-12)
    for b, n in enumerate(lengths.tolist()):  # each sentence alone gives the same entries
        alone = TreeCRF(scores[b : b + 1, : n + 1, : n + 1], lengths[b : b + 1])
        mine = first[:, 0] == b
        zero_b = lambda arcs: torch.cat([torch.zeros_like(arcs[:, :1]), arcs[:, 1:]], 1)
        torch.testing.assert_close(alone.arc_pair_marginals(zero_b(first[mine]), zero_b(second[mine])),
                                   got[mine], rtol=0, atol=1e-12)


@pytest.mark.parametrize("scale", [1.0, 60.0])
def test_gradcheck(scale):
    n = 4
    gen = torch.Generator().manual_seed(4)
    base = scale * torch.randn(1, n + 1, n + 1, generator=gen, dtype=torch.float64)
    first = torch.tensor([[0, 4, 1], [0, 2, 0], [0, 3, 3 - 1], [0, 1, 4]])
    second = torch.tensor([[0, 1, 0], [0, 4, 2], [0, 1, 3], [0, 1, 4]])
    weights = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)

    def fn(scores):
        return (TreeCRF(scores, torch.tensor([n])).arc_pair_marginals(first, second) * weights).sum()

    assert torch.autograd.gradcheck(fn, (base.clone().requires_grad_(),), eps=1e-6, atol=1e-6)


def test_bad_pairs_raise():
    crf = TreeCRF(torch.zeros(2, 4, 4), torch.tensor([3, 2]))
    with pytest.raises(ValueError, match="same b"):
        crf.arc_pair_marginals(torch.tensor([[0, 1, 0]]), torch.tensor([[1, 2, 0]]))
    with pytest.raises(ValueError, match=r"first\[0\]"):
        crf.arc_pair_marginals(torch.tensor([[0, 0, 1]]), torch.tensor([[0, 2, 0]]))
    with pytest.raises(ValueError, match="long"):
        crf.arc_pair_marginals(torch.zeros(1, 3), torch.zeros(1, 3))
