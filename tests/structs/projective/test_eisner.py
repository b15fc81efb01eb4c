"""Eisner's projective decoder against brute-force enumeration of projective trees, against a
scalar textbook Eisner on longer sentences, and for padding invariance."""

from __future__ import annotations

import functools

import pytest
import torch

from parser.structs import eisner, maximum_spanning_tree
from tests.structs.brute import all_trees, is_tree

INF = float("inf")


def is_projective(heads: tuple[int, ...]) -> bool:
    """Every word strictly inside an arc's span descends from the arc's head (ROOT = position 0)."""
    def descends(node: int, ancestor: int) -> bool:
        while node != 0 and node != ancestor:
            node = heads[node - 1]
        return node == ancestor

    for dep, head in enumerate(heads, start=1):
        low, high = min(dep, head), max(dep, head)
        if any(not descends(inner, head) for inner in range(low + 1, high)):
            return False
    return True


@functools.cache
def projective_trees(n: int, single_root: bool) -> torch.Tensor:
    """``[T, n]`` every projective tree of ``n`` words."""
    trees = [t for t in all_trees(n, single_root=single_root) if is_projective(t)]
    return torch.tensor(trees, dtype=torch.long)


def tree_scores(scores: torch.Tensor, heads: torch.Tensor) -> torch.Tensor:
    n = heads.shape[-1]
    return scores[torch.arange(1, n + 1), heads].sum(-1)


def scalar_eisner_score(scores: torch.Tensor, n: int, *, single_root: bool) -> float:
    """Best projective tree score by the textbook recursion (Eisner 1996; McDonald et al. 2005),
    one span at a time; single root by a separate last step over the root word."""
    s = scores.tolist()  # s[dep][head]
    arc = [[s[d][h] if d != h and d != 0 and not (single_root and h == 0) else -INF
            for d in range(n + 1)] for h in range(n + 1)]  # arc[h][d]
    comp = [[[-INF, -INF] for _ in range(n + 1)] for _ in range(n + 1)]
    inc = [[[-INF, -INF] for _ in range(n + 1)] for _ in range(n + 1)]
    for i in range(n + 1):
        comp[i][i] = [0.0, 0.0]
    for width in range(1, n + 1):
        for i in range(n + 1 - width):
            j = i + width
            best = max(comp[i][r][1] + comp[r + 1][j][0] for r in range(i, j))
            inc[i][j] = [best + arc[j][i], best + arc[i][j]]
            comp[i][j][0] = max(comp[i][r][0] + inc[r][j][0] for r in range(i, j))
            comp[i][j][1] = max(inc[i][r][1] + comp[r][j][1] for r in range(i + 1, j + 1))
    if not single_root:
        return comp[0][n][1]
    return max((comp[1][r][0] if r > 1 else 0.0) + comp[r][n][1] + s[r][0] for r in range(1, n + 1))


def check_valid(heads: torch.Tensor, n: int, *, single_root: bool) -> None:
    assert heads[0] == 0 and (heads[n + 1 :] == 0).all()
    words = tuple(heads[1 : n + 1].tolist())
    assert is_tree(words) and is_projective(words), words
    if single_root and n > 0:
        assert sum(h == 0 for h in words) == 1


def random_scores(n: int, generator: torch.Generator, kind: int) -> torch.Tensor:
    if kind == 0:
        scores = torch.randn(n + 1, n + 1, generator=generator, dtype=torch.float64)
    else:  # small integers: ties
        scores = torch.randint(-2, 2, (n + 1, n + 1), generator=generator).double()
    if kind == 2:
        scores[torch.rand(n + 1, n + 1, generator=generator) < 0.3] = -INF
    return scores


def test_is_projective_helper():
    assert is_projective((2, 0, 2))
    assert not is_projective((3, 4, 0, 3))  # 1 <- 3 spans word 2, whose head 4 is outside
    assert not is_projective((0, 4, 0, 1))  # multi-root: ROOT -> 3 spans 1, 2 and crosses 1 -> 4


@pytest.mark.parametrize("single_root", [False, True])
def test_matches_brute_force(single_root):
    generator = torch.Generator().manual_seed(3 + single_root)
    unique = 0
    for trial in range(300):
        n = 1 + trial % 6
        scores = random_scores(n, generator, trial % 3)
        trees = projective_trees(n, single_root)
        weights = tree_scores(scores, trees)
        if not torch.isfinite(weights.max()):
            with pytest.raises(ValueError, match="sentences \\[0\\]"):
                eisner(scores[None], torch.tensor([n]), single_root=single_root)
            continue
        heads = eisner(scores[None], torch.tensor([n]), single_root=single_root)[0]
        check_valid(heads, n, single_root=single_root)
        assert torch.isclose(tree_scores(scores, heads[1 : n + 1]), weights.max(), atol=1e-9)
        top2 = weights.topk(min(2, len(weights))).values
        if len(top2) == 1 or top2[0] - top2[1] > 1e-6:
            unique += 1
            assert heads[1 : n + 1].tolist() == trees[int(weights.argmax())].tolist()
    assert unique > 100


@pytest.mark.parametrize("single_root", [False, True])
def test_longer_sentences_against_scalar_eisner(single_root):
    generator = torch.Generator().manual_seed(17)
    for n in (7, 12, 25, 40):
        scores = torch.randn(n + 1, n + 1, generator=generator, dtype=torch.float64) * 3
        heads = eisner(scores[None], torch.tensor([n]), single_root=single_root)[0]
        check_valid(heads, n, single_root=single_root)
        expected = scalar_eisner_score(scores, n, single_root=single_root)
        assert float(tree_scores(scores, heads[1 : n + 1])) == pytest.approx(expected, abs=1e-9)


def test_projective_best_tree_equals_mst():
    """When the maximum spanning tree is projective, it is also the best projective tree."""
    generator = torch.Generator().manual_seed(8)
    n = 15
    gold = torch.tensor([0] + [0 if d == 6 else (d + 1 if d < 6 else d - 1) for d in range(1, n + 1)])
    scores = torch.randn(1, n + 1, n + 1, generator=generator, dtype=torch.float64)
    scores[0, torch.arange(1, n + 1), gold[1:]] += 10.0  # a chain into word 6 from both sides
    lengths = torch.tensor([n])
    for single_root in (False, True):
        best = maximum_spanning_tree(scores, lengths, single_root=single_root)
        assert torch.equal(best[0], gold)
        assert torch.equal(eisner(scores, lengths, single_root=single_root), best)


def test_padding_invariant_and_float32():
    generator = torch.Generator().manual_seed(5)
    lengths = torch.tensor([7, 3, 2, 11, 1])  # (length 0 is rejected: tests/structs/test_common.py)
    scores = torch.randint(-1, 2, (5, 12, 12), generator=generator).float()
    scores[:, 3, 5] = -INF
    for single_root in (False, True):
        batched = eisner(scores, lengths, single_root=single_root)
        assert batched.dtype == torch.long and batched.shape == (5, 12)
        for b, n in enumerate(lengths.tolist()):
            alone = eisner(scores[b : b + 1, : n + 1, : n + 1], lengths[b : b + 1], single_root=single_root)
            assert torch.equal(batched[b, : n + 1], alone[0])
            assert (batched[b, n + 1 :] == 0).all()
            if n:
                check_valid(batched[b], n, single_root=single_root)


def test_no_tree_and_bad_input_raise():
    scores = torch.zeros(2, 4, 4)
    scores[1, 2, :] = -INF  # word 2 of sentence 1 has no allowed head
    with pytest.raises(ValueError, match=r"sentences \[1\]"):
        eisner(scores, torch.tensor([3, 3]), single_root=True)
    with pytest.raises(ValueError, match="lengths"):
        eisner(torch.zeros(1, 4, 4), torch.tensor([4]), single_root=True)
    with pytest.raises(ValueError, match="scores"):
        eisner(torch.zeros(4, 4), torch.tensor([3]), single_root=True)
