"""Exact tree sampling: empirical frequencies against brute-force probabilities."""

from __future__ import annotations

import pytest
import torch
from scipy.stats import chisquare

from parser.structs import maximum_spanning_tree, sample_trees
from tests.structs.brute import enumerate_distribution, is_tree

INF = float("inf")


def check_trees(heads: torch.Tensor, lengths: torch.Tensor, *, single_root: bool) -> None:
    """``heads [n, B, N+1]``: every sample of every sentence is a tree, zero on padding."""
    assert heads.dtype == torch.long
    assert (heads[..., 0] == 0).all()
    for b, length in enumerate(lengths.tolist()):
        assert (heads[:, b, length + 1 :] == 0).all()
        for row in heads[:, b, 1 : length + 1].tolist():
            assert is_tree(tuple(row))
            if single_root and length > 0:
                assert sum(h == 0 for h in row) == 1


@pytest.mark.parametrize("single_root", [False, True])
def test_frequencies_match_brute_force(single_root):
    generator = torch.Generator().manual_seed(21 + single_root)
    n, draws = 4, 20_000
    scores = torch.zeros(2, 7, 7, dtype=torch.float64)
    scores[0, :5, :5] = torch.randn(5, 5, generator=generator, dtype=torch.float64)
    scores[0, 2, 3] = -INF  # a forbidden arc: trees using it must never appear
    scores[1] = torch.randn(7, 7, generator=generator, dtype=torch.float64)
    lengths = torch.tensor([n, 6])
    heads = sample_trees(scores, lengths, single_root=single_root, n=draws, generator=generator)
    assert heads.shape == (draws, 2, 7)
    trees, log_weights, log_z = enumerate_distribution(scores[0], n, single_root=single_root)
    probs = torch.exp(log_weights - log_z)
    code = (n + 1) ** torch.arange(n)  # a head tuple as one base-(n+1) number
    tree_codes = (torch.tensor(trees) * code).sum(-1)
    sample_codes = (heads[:, 0, 1 : n + 1] * code).sum(-1)
    assert torch.isin(sample_codes, tree_codes).all()  # only trees (with the right root count)
    counts = (sample_codes[:, None] == tree_codes[None, :]).sum(0).double()
    possible = probs > 0
    assert counts[~possible].sum() == 0 and (~possible).any()
    expected, observed = probs[possible] * draws, counts[possible]
    rare = expected < 5  # pooled into one bin so the chi-square approximation holds
    if rare.any():
        expected = torch.cat([expected[~rare], expected[rare].sum()[None]])
        observed = torch.cat([observed[~rare], observed[rare].sum()[None]])
    assert len(expected) > 30
    result = chisquare(observed.numpy(), expected.numpy())
    assert result.pvalue > 1e-3, result
    check_trees(heads[:200], lengths, single_root=single_root)


def test_fixed_seed_reproducible():
    scores = torch.randn(3, 9, 9, generator=torch.Generator().manual_seed(0))
    lengths = torch.tensor([8, 5, 1])  # (length 0 is rejected: tests/structs/test_common.py)
    first = sample_trees(
        scores, lengths, single_root=True, n=50, generator=torch.Generator().manual_seed(7)
    )
    second = sample_trees(
        scores, lengths, single_root=True, n=50, generator=torch.Generator().manual_seed(7)
    )
    other = sample_trees(
        scores, lengths, single_root=True, n=50, generator=torch.Generator().manual_seed(8)
    )
    assert torch.equal(first, second)
    assert not torch.equal(first, other)
    assert (first[:, 2] == 0).all()
    check_trees(first, lengths, single_root=True)


@pytest.mark.parametrize("single_root", [False, True])
def test_valid_trees_under_large_scores_and_forbidden_arcs(single_root):
    generator = torch.Generator().manual_seed(4)
    n = 30
    lengths = torch.tensor([n, 17])
    for scale in (1.0, 10.0, 30.0):
        scores = (scale * torch.randn(2, n + 1, n + 1, generator=generator)).float()
        forbidden = torch.rand(2, n + 1, n + 1, generator=generator) < 0.3
        forbidden[:, :, 0] = False
        scores = scores.masked_fill(forbidden, -INF)
        heads = sample_trees(scores, lengths, single_root=single_root, n=20, generator=generator)
        check_trees(heads, lengths, single_root=single_root)
        deps = torch.arange(n + 1)[None, None, :].expand_as(heads)
        used = forbidden[torch.arange(2)[None, :, None], deps, heads]
        real = (deps >= 1) & (deps <= lengths[None, :, None])
        assert not (used & real).any()


@pytest.mark.parametrize("single_root", [False, True])
def test_concentrated_distribution_samples_the_argmax(single_root):
    # A planted tree ahead of every other arc by 1e3: all mass (to float64) is on it.
    generator = torch.Generator().manual_seed(9)
    n = 60
    gold = torch.tensor(
        [0, 0] + [int(torch.randint(1, d, (1,), generator=generator)) for d in range(2, n + 1)]
    )
    scores = torch.randn(1, n + 1, n + 1, generator=generator)
    scores[0, torch.arange(1, n + 1), gold[1:]] += 1e3
    lengths = torch.tensor([n])
    heads = sample_trees(scores, lengths, single_root=single_root, n=10, generator=generator)
    best = maximum_spanning_tree(scores, lengths, single_root=single_root)
    assert torch.equal(best[0], gold)
    assert (heads == gold).all()


class CountFallback:
    """Wraps ``sample_by_marginals`` as seen by ``sample_trees``: counts the samples it finishes."""

    def __init__(self, monkeypatch):
        from parser.structs.tree import sampling

        self.rows = 0
        self.inner = sampling.sample_by_marginals
        monkeypatch.setattr(sampling, "sample_by_marginals", self)

    def __call__(self, scores, *args, **kwargs):
        self.rows += scores.shape[0]
        return self.inner(scores, *args, **kwargs)


@pytest.mark.parametrize("single_root", [False, True])
def test_exact_fallback_frequencies_match_brute_force(single_root, monkeypatch):
    # Two 2-cycles of 40-nat arcs: the float64 Laplacian has condition ~e^40, the fast path
    # refuses every sample at its first step, so these frequencies test the fallback alone.
    fallback = CountFallback(monkeypatch)
    generator = torch.Generator().manual_seed(31 + single_root)
    n, draws = 4, 20_000
    scores = torch.randn(1, n + 1, n + 1, generator=generator, dtype=torch.float64)
    for dep, head in [(1, 2), (2, 1), (3, 4), (4, 3)]:
        scores[0, dep, head] += 40.0
    heads = sample_trees(
        scores, torch.tensor([n]), single_root=single_root, n=draws, generator=generator
    )
    assert fallback.rows == draws
    trees, log_weights, log_z = enumerate_distribution(scores[0], n, single_root=single_root)
    probs = torch.exp(log_weights - log_z)
    code = (n + 1) ** torch.arange(n)
    tree_codes = (torch.tensor(trees) * code).sum(-1)
    sample_codes = (heads[:, 0, 1 : n + 1] * code).sum(-1)
    assert torch.isin(sample_codes, tree_codes).all()
    counts = (sample_codes[:, None] == tree_codes[None, :]).sum(0).double()
    expected, observed = probs * draws, counts
    rare = expected < 5
    expected = torch.cat([expected[~rare], expected[rare].sum()[None]])
    observed = torch.cat([observed[~rare], observed[rare].sum()[None]])
    assert len(expected) > 10
    result = chisquare(observed.numpy(), expected.numpy())
    assert result.pvalue > 1e-3, result


@pytest.mark.parametrize("single_root", [False, True])
def test_any_scale_gives_trees_and_planted_trees(single_root, monkeypatch):
    fallback = CountFallback(monkeypatch)
    generator = torch.Generator().manual_seed(13 + single_root)
    for n in (30, 100):
        lengths = torch.tensor([n, n // 2 + 3])
        for scale in (100.0, 1e3, 1e4):
            scores = (scale * torch.randn(2, n + 1, n + 1, generator=generator)).float()
            heads = sample_trees(scores, lengths, single_root=single_root, n=2, generator=generator)
            check_trees(heads, lengths, single_root=single_root)
            # A planted tree ahead of each word's other arcs by >= 3 scale holds all the mass.
            gold = [0, 0] + [
                int(torch.randint(0, d, (1,), generator=generator)) for d in range(2, n + 1)
            ]
            if single_root:
                gold = [0, 0] + [
                    int(torch.randint(1, d, (1,), generator=generator)) for d in range(2, n + 1)
                ]
            gold = torch.tensor(gold)
            planted = scale * torch.randn(1, n + 1, n + 1, generator=generator).clamp(-1, 1)
            planted[0, torch.arange(1, n + 1), gold[1:]] += 5 * scale
            heads = sample_trees(
                planted.float(),
                torch.tensor([n]),
                single_root=single_root,
                n=2,
                generator=generator,
            )
            assert (heads[:, 0] == gold).all()
    assert fallback.rows > 0  # the random sentences at these scales need the exact fallback


def test_no_tree_and_bad_input_raise():
    scores = torch.zeros(2, 4, 4)
    scores[1, 3, :] = -INF
    with pytest.raises(ValueError, match="word 3 of sentence 1"):
        sample_trees(scores, torch.tensor([3, 3]), single_root=False, n=2)
    scores = torch.zeros(1, 4, 4)
    scores[0, 1, 1:] = -INF
    scores[0, 2, 1:] = -INF  # words 1 and 2 only attach to ROOT
    with pytest.raises(ValueError, match="single-root"):
        sample_trees(scores, torch.tensor([3]), single_root=True, n=2)
    heads = sample_trees(scores, torch.tensor([3]), single_root=False, n=5)
    assert (heads[:, 0, 1] == 0).all() and (heads[:, 0, 2] == 0).all()
    with pytest.raises(ValueError, match="n:"):
        sample_trees(scores, torch.tensor([3]), single_root=False, n=0)
