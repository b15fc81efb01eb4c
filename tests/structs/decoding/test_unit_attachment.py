"""attach_to_units: the UD punct/cc rule on a worked example, against a scalar reference on random
trees, batched with padding, and always giving trees in which the re-attached words are leaves."""

from __future__ import annotations

import torch

from parser.structs import attach_to_units
from tests.structs.brute import is_tree


def reference(heads: list[int], marked: list[bool]) -> list[int]:
    """One sentence, words 1..n: lift children of marked words, then innermost arc over each
    marked word (its dependent end), else the root word."""
    n = len(heads)
    root = heads.index(0) + 1
    if marked[root - 1] or all(marked):
        return list(heads)
    lifted = []
    for i in range(1, n + 1):
        h = heads[i - 1]
        while h != 0 and marked[h - 1]:
            h = heads[h - 1]
        lifted.append(h)
    out = list(lifted)
    for p in range(1, n + 1):
        if not marked[p - 1]:
            continue
        over = [(abs(h - d), h, d) for d, h in enumerate(lifted, start=1)
                if not marked[d - 1] and min(h, d) < p < max(h, d)]
        out[p - 1] = min(over)[2] if over else root
    return out


def run(heads: list[int], marked: list[bool]) -> list[int]:
    size = len(heads) + 1
    got = attach_to_units(torch.tensor([[0, *heads]]), torch.tensor([len(heads)]),
                          torch.tensor([[False, *marked]]))
    assert got.shape == (1, size)
    return got[0, 1:].tolist()


def test_worked_example():
    # We(1) buy(2) apples(3) ,(4) pears(5) and(6) bananas(7) .(8): a decoded tree that hangs the
    # marks anywhere; conj arcs apples -> pears, apples -> bananas.
    heads = [2, 0, 2, 3, 3, 5, 3, 7]
    marked = [False, False, False, True, False, True, False, True]
    # , -> pears (innermost arc over it: apples -> pears); and -> bananas (apples -> bananas is
    # the only arc over it); . -> buy (no arc passes over the last word: the root word).
    assert run(heads, marked) == [2, 0, 2, 5, 3, 7, 3, 2]


def test_children_of_marked_words_are_lifted():
    # word 3 hangs on the comma (2), which hangs on word 1: it moves up to 1.
    heads, marked = [0, 1, 2, 1], [False, True, False, False]
    new = run(heads, marked)
    assert new[2] == 1 and is_tree(tuple(new))
    assert all(h != 2 for h in new)  # the comma is a leaf


def test_root_marked_or_all_marked_sentences_are_left_alone():
    assert run([2, 0, 2], [False, True, False]) == [2, 0, 2]
    assert run([0, 1], [True, True]) == [0, 1]


def test_random_trees_match_the_reference_and_stay_trees():
    gen = torch.Generator().manual_seed(0)
    from tests.structs.brute import all_trees

    for n in (3, 5, 6):
        trees = all_trees(n, single_root=True)
        for index in torch.randint(len(trees), (150,), generator=gen).tolist():
            heads = list(trees[index])
            marked = (torch.rand(n, generator=gen) < 0.35).tolist()
            new = run(heads, marked)
            assert new == reference(heads, marked), (heads, marked)
            assert is_tree(tuple(new)) and sum(h == 0 for h in new) == 1
            if not marked[heads.index(0)]:
                assert all(not marked[h - 1] for h in new if h > 0)  # marked words are leaves


def test_batched_with_padding_equals_one_at_a_time():
    gen = torch.Generator().manual_seed(4)
    from tests.structs.brute import all_trees

    rows = []
    for n in (6, 3, 5):
        trees = all_trees(n, single_root=True)
        heads = list(trees[int(torch.randint(len(trees), (1,), generator=gen))])
        rows.append((heads, (torch.rand(n, generator=gen) < 0.4).tolist()))
    size = 7
    heads = torch.zeros(3, size, dtype=torch.long)
    marked = torch.zeros(3, size, dtype=torch.bool)
    for b, (h, m) in enumerate(rows):
        heads[b, 1 : len(h) + 1] = torch.tensor(h)
        marked[b, 1 : len(m) + 1] = torch.tensor(m)
        marked[b, len(m) + 1 :] = True  # padding marks are ignored
    got = attach_to_units(heads, torch.tensor([6, 3, 5]), marked)
    for b, (h, m) in enumerate(rows):
        assert got[b, 1 : len(h) + 1].tolist() == run(h, m)
        assert (got[b, len(h) + 1 :] == 0).all()
