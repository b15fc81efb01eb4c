"""Maximum spanning tree decoding against brute-force enumeration and networkx's Edmonds."""

from __future__ import annotations

import functools

import pytest
import torch

from parser.structs import maximum_spanning_tree
from tests.structs.brute import all_trees, is_tree

nx = pytest.importorskip("networkx")

INF = float("inf")


@functools.cache
def trees_tensor(n: int, single_root: bool) -> torch.Tensor:
    """``[T, n]`` every tree of ``n`` words (heads of words 1..n)."""
    return torch.tensor(all_trees(n, single_root=single_root), dtype=torch.long)


def tree_scores(scores: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
    """``scores [n+1, n+1]``, ``heads [..., n]`` -> summed arc scores ``[...]``."""
    n = heads.shape[-1]
    return scores[torch.arange(1, n + 1), heads].sum(-1)


def random_scores(n: int, generator: torch.Generator, kind: int) -> torch.Tensor:
    if kind == 0:
        scores = torch.randn(n + 1, n + 1, generator=generator, dtype=torch.float64)
    else:  # small integers: many ties
        scores = torch.randint(-2, 2, (n + 1, n + 1), generator=generator).double()
    if kind == 2:
        scores[torch.rand(n + 1, n + 1, generator=generator) < 0.3] = -INF
    return scores


def check_valid(heads: torch.Tensor, n: int, *, single_root: bool) -> None:
    assert heads[0] == 0 and (heads[n + 1 :] == 0).all()
    words = tuple(heads[1 : n + 1].tolist())
    assert is_tree(words), words
    assert all(h != d for d, h in enumerate(words, start=1))
    if single_root and n > 0:
        assert sum(h == 0 for h in words) == 1


@pytest.mark.parametrize("single_root", [False, True])
def test_matches_brute_force(single_root):
    generator = torch.Generator().manual_seed(11 + single_root)
    checked_unique = 0
    for trial in range(240):
        n = 1 + trial % 5
        scores = random_scores(n, generator, trial % 3)
        trees = trees_tensor(n, single_root)
        weights = tree_scores(scores, trees)
        if not torch.isfinite(weights.max()):
            with pytest.raises(ValueError, match="no .*tree"):
                maximum_spanning_tree(scores[None], torch.tensor([n]), single_root=single_root)
            continue
        heads = maximum_spanning_tree(scores[None], torch.tensor([n]), single_root=single_root)[0]
        check_valid(heads, n, single_root=single_root)
        best = tree_scores(scores, heads[1 : n + 1])
        assert torch.isclose(best, weights.max(), atol=1e-9), (scores, heads, weights.max())
        top2 = weights.topk(min(2, len(weights))).values
        if len(top2) == 1 or top2[0] - top2[1] > 1e-6:
            checked_unique += 1
            assert heads[1 : n + 1].tolist() == trees[int(weights.argmax())].tolist()
    assert checked_unique > 100


@pytest.mark.parametrize("single_root", [False, True])
def test_no_tree_raises(single_root):
    scores = torch.zeros(1, 4, 4)
    scores[0, 2, :] = -INF  # word 2 has no allowed head
    with pytest.raises(ValueError, match="sentence 0"):
        maximum_spanning_tree(scores, torch.tensor([3]), single_root=single_root)
    # Words 1 and 2 may only attach to ROOT: a multi-root tree exists, a single-root one does not.
    scores = torch.zeros(1, 4, 4)
    scores[0, 1, 1:] = -INF
    scores[0, 2, 1:] = -INF
    if single_root:
        with pytest.raises(ValueError, match="single-root"):
            maximum_spanning_tree(scores, torch.tensor([3]), single_root=True)
    else:
        heads = maximum_spanning_tree(scores, torch.tensor([3]), single_root=False)[0]
        assert heads[1] == 0 and heads[2] == 0


def test_bad_input_raises():
    with pytest.raises(ValueError, match="scores"):
        maximum_spanning_tree(torch.zeros(4, 4), torch.tensor([3]), single_root=True)
    with pytest.raises(ValueError, match="lengths"):
        maximum_spanning_tree(torch.zeros(1, 4, 4), torch.tensor([4]), single_root=True)
    nan = torch.zeros(1, 4, 4)
    nan[0, 2, 1] = float("nan")
    with pytest.raises(ValueError, match=r"dep=2, head=1"):
        maximum_spanning_tree(nan, torch.tensor([3]), single_root=True)


def test_ties_are_deterministic_and_padding_invariant():
    generator = torch.Generator().manual_seed(5)
    lengths = torch.tensor([7, 3, 1, 9])  # (length 0 is rejected: tests/structs/test_common.py)
    scores = torch.randint(-1, 2, (4, 10, 10), generator=generator).float()
    scores[:, 3, 5] = -INF
    for single_root in (False, True):
        batched = maximum_spanning_tree(scores, lengths, single_root=single_root)
        assert torch.equal(batched, maximum_spanning_tree(scores, lengths, single_root=single_root))
        assert batched.dtype == torch.long and batched.shape == (4, 10)
        for b, n in enumerate(lengths.tolist()):
            alone = maximum_spanning_tree(
                scores[b : b + 1, : n + 1, : n + 1], lengths[b : b + 1], single_root=single_root
            )[0]
            assert torch.equal(batched[b, : n + 1], alone)
            check_valid(batched[b], n, single_root=single_root)
    assert (batched[2] == 0).all()


def networkx_best(scores: torch.Tensor, n: int) -> float:
    """Best multi-root tree score by networkx's Edmonds (arcs head -> dep)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n + 1))
    for dep in range(1, n + 1):
        for head in range(n + 1):
            if head != dep and torch.isfinite(scores[dep, head]):
                graph.add_edge(head, dep, weight=float(scores[dep, head]))
    tree = nx.maximum_spanning_arborescence(graph, attr="weight")
    return sum(float(scores[dep, head]) for head, dep in tree.edges())


def networkx_best_single_root(scores: torch.Tensor, n: int) -> float:
    """Best single-root score: the best multi-root tree with each root arc alone allowed."""
    best = -INF
    for child in range(1, n + 1):
        if not torch.isfinite(scores[child, 0]):
            continue
        only = scores.clone()
        only[1:, 0] = -INF
        only[child, 0] = scores[child, 0]
        best = max(best, networkx_best(only, n))
    return best


@pytest.mark.parametrize("single_root", [False, True])
def test_larger_sentences_against_networkx(single_root):
    generator = torch.Generator().manual_seed(3)
    # networkx has no root constraint: the single-root reference runs it once per root child.
    sizes = [(8, 1.0), (14, 10.0), (18, 1.0)] if single_root else [(12, 1.0), (25, 10.0), (40, 1.0)]
    for n, scale in sizes:
        scores = scale * torch.randn(n + 1, n + 1, generator=generator, dtype=torch.float64)
        scores[torch.rand(n + 1, n + 1, generator=generator) < 0.2] = -INF
        scores[1:, 0] = scale * torch.randn(n, generator=generator, dtype=torch.float64) - 2 * scale
        heads = maximum_spanning_tree(scores[None], torch.tensor([n]), single_root=single_root)[0]
        check_valid(heads, n, single_root=single_root)
        got = float(tree_scores(scores, heads[1 : n + 1]))
        reference = (
            networkx_best_single_root(scores, n) if single_root else networkx_best(scores, n)
        )
        assert got == pytest.approx(reference, abs=1e-8)


def test_long_sentences_large_scores_float32():
    generator = torch.Generator().manual_seed(8)
    n = 250
    for scale in (1.0, 1e4):
        scores = (scale * torch.randn(2, n + 1, n + 1, generator=generator)).float()
        lengths = torch.tensor([n, 137])
        for single_root in (False, True):
            heads = maximum_spanning_tree(scores, lengths, single_root=single_root)
            for b, length in enumerate(lengths.tolist()):
                check_valid(heads[b], length, single_root=single_root)
    # A planted tree that beats every other arc by a wide margin must be found exactly.
    gold = torch.tensor(
        [0] + [int(torch.randint(0, d, (1,), generator=generator)) for d in range(1, n + 1)]
    )
    scores = torch.randn(1, n + 1, n + 1, generator=generator)
    scores[0, torch.arange(1, n + 1), gold[1:]] += 1e3
    heads = maximum_spanning_tree(scores, torch.tensor([n]), single_root=False)
    assert torch.equal(heads[0], gold)


def test_greedy_trees_and_contracted_sentences_in_one_batch():
    # Sentence 0: every word's best head already gives a single-root tree (the greedy shortcut);
    # sentence 1: the best heads form a cycle and two root arcs; sentence 2: several cycles at once.
    generator = torch.Generator().manual_seed(12)
    scores = torch.randn(3, 6, 6, generator=generator, dtype=torch.float64)
    greedy = [0, 0, 1, 2, 2, 4]
    scores[0, torch.arange(1, 6), torch.tensor(greedy[1:])] += 5.0
    scores[1, 1, 2] += 5.0
    scores[1, 2, 1] += 5.0
    scores[1, 3, 0] += 5.0
    scores[1, 4, 0] += 5.0
    for dep, head in [(1, 2), (2, 1), (3, 4), (4, 3)]:
        scores[2, dep, head] += 5.0
    lengths = torch.tensor([5, 5, 4])
    for single_root in (False, True):
        heads = maximum_spanning_tree(scores, lengths, single_root=single_root)
        for b, n in enumerate(lengths.tolist()):
            check_valid(heads[b], n, single_root=single_root)
            weights = tree_scores(scores[b], trees_tensor(n, single_root))
            assert torch.isclose(tree_scores(scores[b], heads[b, 1 : n + 1]), weights.max())
        assert heads[0].tolist() == greedy
