"""Projective punctuation by the scores: the validator's two conditions hold for every mark, each
mark's head is its best allowed head (checked by a slow, definition-level reference), and a
projective tree of the other words never leaves a mark without a head."""

from __future__ import annotations

import random

import pytest
import torch

from parser.structs import attach_punct_projectively, eisner
from tests.structs.brute import all_trees


def ancestors(heads: list[int], x: int) -> set[int]:
    """x and every word above it (ROOT 0 included)."""
    seen = {x}
    while x != 0:
        x = heads[x]
        seen.add(x)
    return seen


def punct_errors(heads: list[int], marks: set[int]) -> list[int]:
    """The marks the UD validator would reject (punct-is-nonproj / punct-causes-nonproj), by
    definition: a word strictly between a mark and its head outside the head's subtree, or the
    mark strictly inside an arc's span and outside that arc head's subtree."""
    n = len(heads) - 1
    bad = []
    for p in sorted(marks):
        h = heads[p]
        lo, hi = min(h, p), max(h, p)
        nonproj = any(h not in ancestors(heads, x) for x in range(lo + 1, hi))
        causes = any(min(x, heads[x]) < p < max(x, heads[x]) and heads[x] not in ancestors(heads, p)
                     for x in range(1, n + 1) if x != p)
        if nonproj or causes:
            bad.append(p)
    return bad


def reference_allowed(tree: list[int], placed: set[int], p: int, content: set[int]) -> set[int]:
    """Heads h (content words) that keep mark p projective among the placed words."""
    allowed = set()
    for h in content:
        lo, hi = min(h, p), max(h, p)
        inside = all(h in ancestors(tree, x) for x in range(lo + 1, hi) if x in placed)
        nested = all(tree[x] == 0 or tree[x] in ancestors(tree, h)
                     for x in placed if min(x, tree[x]) < p < max(x, tree[x]))
        if inside and nested:
            allowed.add(h)
    return allowed


def random_case(rng: random.Random, n: int):
    trees = all_trees(n, single_root=True) if n <= 5 else None
    heads = list(rng.choice(trees)) if trees else _random_tree(rng, n)
    heads = [0, *heads]
    marks = {x for x in range(1, n + 1) if rng.random() < 0.35 and heads[x] != 0}
    return heads, marks


def _random_tree(rng: random.Random, n: int) -> list[int]:
    order = list(range(1, n + 1))
    rng.shuffle(order)
    heads = [0] * (n + 1)
    for i, x in enumerate(order[1:], start=1):
        heads[x] = rng.choice(order[:i])
    return heads[1:]


@pytest.mark.parametrize("seed", range(60))
def test_marks_get_their_best_allowed_head(seed):
    rng = random.Random(seed)
    n = rng.randint(3, 9)
    heads, marks = random_case(rng, n)
    scores = torch.randn(1, n + 1, n + 1, generator=torch.Generator().manual_seed(seed))
    marked = torch.zeros(1, n + 1, dtype=torch.bool)
    marked[0, sorted(marks)] = True
    new, stuck = attach_punct_projectively(torch.tensor([heads]), torch.tensor([n]), marked, scores)
    new = new[0].tolist()
    content = set(range(1, n + 1)) - marks
    # The reference: the other words' tree (a mark's children moved up), marks left to right.
    tree = list(heads)
    for x in content:
        while tree[x] in marks:
            tree[x] = heads[tree[x]]
    assert [new[x] for x in content] == [tree[x] for x in content]
    placed, all_found = set(content), True
    for p in sorted(marks):
        allowed = reference_allowed(tree, placed, p, content)
        if allowed:
            best = max(allowed, key=lambda h: (float(scores[0, p, h]), -h))
            assert new[p] == best
        else:
            all_found = False
            assert new[p] == heads[p]
        tree[p] = new[p]
        placed.add(p)
    assert bool(stuck[0]) == (not all_found)
    if all_found:
        assert punct_errors(new, marks) == []


@pytest.mark.parametrize("seed", range(20))
def test_a_projective_tree_always_leaves_a_valid_head(seed):
    generator = torch.Generator().manual_seed(seed)
    n = 12
    scores = torch.randn(3, n + 1, n + 1, generator=generator)
    heads = eisner(scores, torch.full((3,), n), single_root=True)
    marked = (torch.rand(3, n + 1, generator=generator) < 0.3) & (heads != 0)
    marked[:, 0] = False
    new, stuck = attach_punct_projectively(heads, torch.full((3,), n), marked, scores)
    assert not stuck.any()
    for b in range(3):
        marks = {int(x) for x in marked[b].nonzero().flatten()}
        assert punct_errors(new[b].tolist(), marks) == []


def test_sentences_left_as_decoded():
    heads = torch.tensor([[0, 0, 1], [0, 2, 0]])
    marked = torch.tensor([[False, True, False], [False, True, True]])  # marked root word
    new, stuck = attach_punct_projectively(heads, torch.tensor([2, 2]), marked, torch.zeros(2, 3, 3))
    assert torch.equal(new, heads) and not stuck.any()
