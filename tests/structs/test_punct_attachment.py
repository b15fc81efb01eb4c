"""Projective punctuation by the scores: the validator's two conditions hold for every mark, each
mark's head is its best allowed head (checked by a slow, definition-level reference), and a
projective tree of the other words never leaves a mark without a head."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from parser.data.batching import encode_all
from parser.data.conllu_io import read_conllu
from parser.inference import load_parser
from parser.inference.parse import model_outputs
from parser.structs import attach_punct_projectively, eisner, maximum_spanning_tree
from parser.structs.decoding import native as compiled
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


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("seed", range(60))
def test_marks_get_their_best_allowed_head(seed, native):
    rng = random.Random(seed)
    n = rng.randint(3, 9)
    heads, marks = random_case(rng, n)
    scores = torch.randn(1, n + 1, n + 1, generator=torch.Generator().manual_seed(seed))
    marked = torch.zeros(1, n + 1, dtype=torch.bool)
    marked[0, sorted(marks)] = True
    new, stuck = attach_punct_projectively(torch.tensor([heads]), torch.tensor([n]), marked, scores,
                                           native=native)
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


def test_the_compiled_twin_builds_on_this_machine():
    assert compiled.native_punct(torch.zeros(1, 2, dtype=torch.long), torch.tensor([1]),
                                 torch.zeros(1, 2, dtype=torch.bool), torch.zeros(1, 2, 2)) is not None


@pytest.mark.parametrize("seed", range(10))
def test_compiled_and_torch_agree_on_padded_batches_with_ties_and_forbidden_arcs(seed):
    generator = torch.Generator().manual_seed(seed)
    batch, size = 8, int(torch.randint(3, 30, (1,), generator=generator))
    lengths = torch.randint(1, size, (batch,), generator=generator)
    lengths[0] = size - 1
    # few distinct values (ties between heads) and forbidden arcs, as the UD rules make them
    scores = torch.randint(0, 3, (batch, size, size), generator=generator).float()
    scores[torch.rand(batch, size, size, generator=generator) < 0.2] = float("-inf")
    scores[:, :, 0] = 0.0
    trees = maximum_spanning_tree(torch.randn(batch, size, size, generator=generator), lengths,
                                  single_root=bool(seed % 2))
    marked = torch.rand(batch, size, generator=generator) < 0.3
    got = attach_punct_projectively(trees, lengths, marked, scores)
    expected = attach_punct_projectively(trees, lengths, marked, scores, native=False)
    words = torch.arange(size)[None, :] <= lengths[:, None]
    assert torch.equal(got[0].masked_fill(~words, 0), expected[0].masked_fill(~words, 0))
    assert torch.equal(got[1], expected[1])


def test_compiled_and_torch_agree_on_a_trained_models_scores():
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    model, vocabs, _ = load_parser(fixtures / "pre_layers" / "parser.pt")
    sentences = read_conllu(fixtures / "tiny-dev.conllu").sentences
    punct, marks = vocabs.upos.index("PUNCT"), 0
    with torch.no_grad():
        for batch, out in model_outputs(model, encode_all(sentences, vocabs), tokens_per_batch=500,
                                        cells_per_batch=None, device="cpu"):
            arcs, lengths = out.dist.arc_scores, out.dist.lengths
            trees = maximum_spanning_tree(arcs, lengths, single_root=True)
            marked = batch.upos == punct
            got = attach_punct_projectively(trees, lengths, marked, arcs)
            expected = attach_punct_projectively(trees, lengths, marked, arcs, native=False)
            assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
            marks += int(marked.sum())
    assert marks > 0
