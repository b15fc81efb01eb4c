"""Exact k-best trees against brute-force enumeration (every tree sorted by score, then by the
(head, label) sequence), for every length up to 7, single- and multi-root, labeled and unlabeled,
random and tie-heavy scores, -inf arcs, sentences without trees, and batched == one at a time."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from parser.structs import TreeCRF, k_best_trees
from tests.structs.brute import all_trees, is_tree

INF = float("inf")


@functools.cache
def trees_of(n: int, single_root: bool) -> np.ndarray:
    """``[T, n]`` every tree of ``n`` words (heads of words 1..n), enumerated with arrays."""
    heads = np.indices((n + 1,) * n).reshape(n, -1).T  # every head assignment, lexicographic
    words = np.arange(1, n + 1)
    heads = heads[(heads != words).all(1)]
    if single_root:
        heads = heads[(heads == 0).sum(1) == 1]
    parent = np.concatenate([np.zeros((len(heads), 1), dtype=heads.dtype), heads], 1)
    jump = parent
    for _ in range(max(1, n.bit_length())):  # 2**steps >= n: every path has reached ROOT or a cycle
        jump = np.take_along_axis(jump, jump, 1)
    return heads[(jump == 0).all(1)]


def brute_k_best(scores: torch.Tensor, n: int, k: int, *, single_root: bool):
    """``scores [n+1, n+1, L]`` of one sentence -> ``(pairs [m, n, 2], tree scores [m])``, the first
    ``m = min(k, #finite trees)`` labeled trees by score descending, then (h1, l1, h2, l2, ...)."""
    values = scores.double().numpy()
    n_labels = values.shape[2]
    trees = trees_of(n, single_root)
    labels = np.indices((n_labels,) * n).reshape(n, -1).T
    words = np.arange(1, n + 1)
    arc = values[words[None, :], trees]  # [T, n, L]
    picked = arc[:, None, words - 1, labels]  # [T, Lab, n]
    totals = picked.reshape(-1, n).sum(1)  # exact on integer scores; random ones have no ties
    heads = np.repeat(trees, len(labels), 0)
    labs = np.tile(labels, (len(trees), 1))
    keep = np.isfinite(totals)
    totals, heads, labs = totals[keep], heads[keep], labs[keep]
    sequence = np.stack([heads, labs], 2).reshape(len(totals), 2 * n)  # (h1, l1, h2, l2, ...)
    order = np.lexsort(tuple(sequence.T[::-1]) + (-totals,))[:k]
    return np.stack([heads[order], labs[order]], 2), totals[order]


def random_scores(batch: int, n: int, labels: int, kind: str, generator: torch.Generator):
    shape = (batch, n + 1, n + 1, labels)
    if kind == "random":
        return torch.randn(shape, generator=generator, dtype=torch.float64)
    scores = torch.randint(0, 2, shape, generator=generator).double()  # many ties
    if kind == "forbidden":
        scores[torch.rand(shape, generator=generator) < 0.25] = -INF
    return scores


def check_against_brute(scores, lengths, k, *, single_root, labeled):
    """k_best_trees on the batch equals brute force on each sentence (and -1 rows after)."""
    out = k_best_trees(scores if labeled else scores[..., 0], lengths, k=k, single_root=single_root)
    assert out.heads.shape == (k, *scores.shape[:2]) and out.scores.shape == (k, scores.shape[0])
    assert (out.labels is not None) == labeled
    for b, n in enumerate(lengths.tolist()):
        pairs, totals = brute_k_best(scores[b, : n + 1, : n + 1], n, k, single_root=single_root)
        m = len(totals)
        assert out.heads[:m, b, 1 : n + 1].tolist() == pairs[:, :, 0].tolist(), (b, n)
        assert (out.heads[:m, b, 0] == 0).all() and (out.heads[:m, b, n + 1 :] == 0).all()
        if labeled:
            assert out.labels[:m, b, 1 : n + 1].tolist() == pairs[:, :, 1].tolist(), (b, n)
        assert np.allclose(out.scores[:m, b].numpy(), totals, rtol=0.0, atol=1e-12)
        assert (out.heads[m:, b] == -1).all() and torch.isneginf(out.scores[m:, b]).all()
        if labeled:
            assert (out.labels[m:, b] == -1).all()
        for rank in range(m):
            assert is_tree(tuple(pairs[rank, :, 0].tolist()))
    return out


@pytest.mark.parametrize("kind", ["random", "ties"])
@pytest.mark.parametrize("single_root", [True, False])
def test_unlabeled_every_length_up_to_6(single_root, kind):
    generator = torch.Generator().manual_seed(3 + single_root)
    lengths = torch.tensor([1, 2, 3, 4, 5, 6, 6, 4, 2, 5])
    scores = random_scores(len(lengths), 6, 1, kind, generator)
    check_against_brute(scores, lengths, 12, single_root=single_root, labeled=False)


@pytest.mark.parametrize("single_root", [True, False])
def test_unlabeled_length_7(single_root):
    generator = torch.Generator().manual_seed(7)
    for kind in ("random", "ties"):
        scores = random_scores(1, 7, 1, kind, generator)
        check_against_brute(scores, torch.tensor([7]), 8, single_root=single_root, labeled=False)


@pytest.mark.parametrize("kind", ["random", "ties", "forbidden"])
@pytest.mark.parametrize("single_root", [True, False])
def test_labeled_multigraph(single_root, kind):
    # The 2nd best labeled tree may be the best tree with one arc's 2nd label: brute force over
    # every (tree, labels) pair decides.
    generator = torch.Generator().manual_seed(5 + single_root)
    lengths = torch.tensor([1, 2, 3, 4, 5, 3])
    for n_labels in (2, 3):
        scores = random_scores(len(lengths), 5, n_labels, kind, generator)
        check_against_brute(scores, lengths, 10, single_root=single_root, labeled=True)


@pytest.mark.parametrize("labeled", [False, True])
@pytest.mark.parametrize("single_root", [True, False])
def test_k_larger_than_the_number_of_trees(single_root, labeled):
    generator = torch.Generator().manual_seed(9)
    lengths = torch.tensor([1, 2, 3])
    scores = random_scores(3, 3, 2 if labeled else 1, "ties", generator)
    out = check_against_brute(scores, lengths, 140, single_root=single_root, labeled=labeled)
    counts = (out.heads[:, :, 0] == 0).sum(0).tolist()
    trees = [len(trees_of(n, single_root)) * (2 if labeled else 1) ** n for n in (1, 2, 3)]
    assert counts == trees  # every tree once, then -1 rows


@pytest.mark.parametrize("single_root", [True, False])
def test_forbidden_arcs_and_restrict(single_root):
    generator = torch.Generator().manual_seed(13)
    lengths = torch.tensor([2, 3, 4, 5, 5, 4])
    scores = random_scores(len(lengths), 5, 1, "forbidden", generator)
    check_against_brute(scores, lengths, 15, single_root=single_root, labeled=False)
    # restrict(allowed).kbest respects the mask: equal to brute force on the masked scores.
    base = torch.randn(len(lengths), 6, 6, generator=generator, dtype=torch.float64)
    allowed = torch.rand(len(lengths), 6, 6, generator=generator) < 0.7
    allowed[:, :, 0] |= torch.rand(len(lengths), 6, generator=generator) < 0.5
    out = TreeCRF(base, lengths, single_root=single_root).restrict(allowed).kbest(15)
    masked = base.masked_fill(~allowed, -INF)[..., None]
    expected = check_against_brute(masked, lengths, 15, single_root=single_root, labeled=False)
    assert torch.equal(out.heads, expected.heads)
    used = allowed[None].expand(15, -1, -1, -1).gather(3, out.heads.clamp(min=0)[..., None])[..., 0]
    words = torch.arange(6)[None, None, :] <= lengths[None, :, None]
    present = out.heads[:, :, :1] == 0
    assert (used | ~words | ~present)[:, :, 1:].all()


@pytest.mark.parametrize("single_root", [True, False])
def test_sentence_without_a_tree_gets_minus_one_rows(single_root):
    scores = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    scores[1, 2, :] = -INF  # word 2 of sentence 1 has no allowed head
    lengths = torch.tensor([4, 4, 3])
    out = k_best_trees(scores, lengths, k=4, single_root=single_root)
    assert (out.heads[:, 1] == -1).all() and torch.isneginf(out.scores[:, 1]).all()
    check_against_brute(scores[..., None], lengths, 4, single_root=single_root, labeled=False)


def test_single_root_infeasible_multi_root_feasible():
    scores = torch.zeros(2, 4, 4, dtype=torch.float64)
    scores[0, 1, 2:] = -INF  # words 1 and 2 may only attach to ROOT
    scores[0, 2, 1:] = -INF
    lengths = torch.tensor([3, 3])
    single = k_best_trees(scores, lengths, k=3, single_root=True)
    assert (single.heads[:, 0] == -1).all() and (single.heads[:, 1] >= 0).all()
    multi = k_best_trees(scores, lengths, k=3, single_root=False)
    assert multi.heads[0, 0].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("labeled", [False, True])
@pytest.mark.parametrize("single_root", [True, False])
def test_k1_is_argmax_and_log_prob(single_root, labeled):
    generator = torch.Generator().manual_seed(21)
    lengths = torch.tensor([9, 3, 12, 4, 7])
    shape = (5, 13, 13, 4) if labeled else (5, 13, 13)
    crf = TreeCRF(torch.randn(shape, generator=generator), lengths, single_root=single_root)
    best = crf.kbest(3)
    argmax = crf.argmax()
    if labeled:
        assert torch.equal(best.heads[0], argmax[0]) and torch.equal(best.labels[0], argmax[1])
    else:
        assert torch.equal(best.heads[0], argmax)
    assert (best.scores[:-1] >= best.scores[1:]).all()
    for rank in range(3):  # every sentence has 3 trees: log_prob takes each rank as it is
        log_prob = crf.log_prob(best.heads[rank], best.labels[rank] if labeled else None)
        assert torch.allclose(log_prob.double(), best.scores[rank] - crf.log_partition.double(),
                              atol=1e-4)


@pytest.mark.parametrize("single_root", [True, False])
def test_k1_under_ties_scores_as_argmax(single_root):
    # With ties argmax returns some best tree, kbest the first best one in lexicographic order:
    # the same score always, the same tree where the best tree is unique.
    generator = torch.Generator().manual_seed(4)
    scores = torch.randint(-3, 3, (40, 7, 7), generator=generator).double()
    crf = TreeCRF(scores, torch.full((40,), 6), single_root=single_root)
    best, argmax = crf.kbest(2), crf.argmax()
    assert torch.equal(best.scores[0], crf.score(argmax))
    unique = best.scores[0] > best.scores[1]
    assert 0 < int(unique.sum()) < 40
    assert torch.equal(best.heads[0][unique], argmax[unique])
    assert (best.heads[0] != argmax).any()  # the lexicographic tie order is not argmax's


@pytest.mark.parametrize("single_root", [True, False])
def test_enumeration_helper(single_root):
    for n in range(1, 5):
        assert trees_of(n, single_root).tolist() == [list(t) for t in all_trees(n, single_root=single_root)]


def test_padding_invariance():
    generator = torch.Generator().manual_seed(17)
    lengths = torch.tensor([3, 8, 1, 5, 8, 2])
    scores = torch.randint(-1, 2, (6, 9, 9, 2), generator=generator).double()
    for single_root in (True, False):
        batched = k_best_trees(scores, lengths, k=6, single_root=single_root)
        for b, n in enumerate(lengths.tolist()):
            alone = k_best_trees(scores[b : b + 1, : n + 1, : n + 1], lengths[b : b + 1], k=6,
                                 single_root=single_root)
            present = batched.heads[:, b, 0] == 0
            assert torch.equal(batched.heads[:, b, : n + 1], alone.heads[:, 0])
            assert (batched.heads[present, b, n + 1 :] == 0).all()
            assert torch.equal(batched.labels[:, b, : n + 1], alone.labels[:, 0])
            assert torch.equal(batched.scores[:, b], alone.scores[:, 0])


@pytest.mark.parametrize("k", [0, -2, 1.5, True])
def test_bad_k(k):
    with pytest.raises(ValueError, match="k = "):
        k_best_trees(torch.zeros(1, 3, 3), torch.tensor([2]), k=k, single_root=True)
