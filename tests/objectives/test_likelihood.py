"""Likelihood and the local head cross-entropy against brute-force enumeration."""

from __future__ import annotations

import pytest
import torch

from parser.objectives import Likelihood, LocalHeadCrossEntropy, ParserOutput
from tests.objectives.brute_ref import structures
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

LENGTHS = [3, 2]
HEADS = [[2, 0, 2], [0, 1]]
RELS = [[0, 1, 1], [1, 0]]


def consistent(tree, labels, heads, rels):
    ok = all(g == -1 or t == g for t, g in zip(tree, heads))
    if labels is not None and rels is not None:
        ok = ok and all(g == -1 or lab == g for lab, g in zip(labels, rels))
    return ok


def brute_nll(scores, heads, rels=None, *, single_root=True):
    """Summed -log p(structures consistent with the annotation) over the batch."""
    total = 0.0
    for b, n in enumerate(LENGTHS):
        items, logw = structures(scores[b, : n + 1, : n + 1], n, single_root=single_root)
        keep = torch.tensor([consistent(t, lab, heads[b], None if rels is None else rels[b]) for t, lab in items])
        total = total - (torch.logsumexp(logw[keep], 0) - torch.logsumexp(logw, 0))
    return total


@pytest.mark.parametrize("single_root", [True, False])
@pytest.mark.parametrize("heads", [HEADS, [[2, -1, 2], [-1, 1]], [[-1, -1, -1], [0, 1]]])
def test_unlabeled_likelihood_matches_enumeration(single_root, heads):
    scores = random_scores(LENGTHS, seed=1)
    batch = make_batch(LENGTHS, heads=heads, rels=RELS)
    out = Likelihood()(ParserOutput(TreeCRF(scores, batch.lengths, single_root=single_root)), batch)
    expected = brute_nll(scores, heads, single_root=single_root) / 5
    torch.testing.assert_close(out.loss, expected)
    assert set(out.logs) == {"loss", "tree_nll"}
    assert not out.logs["loss"].requires_grad


@pytest.mark.parametrize(
    "heads, rels", [(HEADS, RELS), (HEADS, [[0, -1, 1], [-1, 0]]), ([[2, -1, 2], [-1, 1]], [[-1, 1, 1], [1, 0]])]
)
def test_joint_labeled_likelihood_matches_enumeration(heads, rels):
    scores = random_scores(LENGTHS, labels=2, seed=2)
    batch = make_batch(LENGTHS, heads=heads, rels=rels)
    out = Likelihood()(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    torch.testing.assert_close(out.loss, brute_nll(scores, heads, rels) / 5)


def test_classifier_likelihood_adds_label_cross_entropy():
    scores = random_scores(LENGTHS, seed=3)
    label_scores = random_scores(LENGTHS, labels=3, seed=4)
    rels = [[0, 2, -1], [1, 0]]
    batch = make_batch(LENGTHS, heads=HEADS, rels=rels)
    out = Likelihood()(ParserOutput(TreeCRF(scores, batch.lengths), label_scores), batch)
    label_nll = 0.0
    for b, n in enumerate(LENGTHS):
        for d in range(1, n + 1):
            if rels[b][d - 1] >= 0:
                label_nll -= label_scores[b, d, HEADS[b][d - 1]].log_softmax(-1)[rels[b][d - 1]]
    tree_nll = brute_nll(scores, HEADS)
    torch.testing.assert_close(out.loss, (tree_nll + label_nll) / 5)
    torch.testing.assert_close(out.logs["label_nll"], (label_nll / 5).detach())
    torch.testing.assert_close(out.logs["tree_nll"], (tree_nll / 5).detach())


def test_likelihood_gradcheck_partial_annotation():
    lengths = torch.tensor(LENGTHS)
    batch = make_batch(LENGTHS, heads=[[2, -1, 2], [-1, 1]], rels=RELS)
    scores = random_scores(LENGTHS, seed=5)
    torch.autograd.gradcheck(
        lambda s: Likelihood()(ParserOutput(TreeCRF(s, lengths)), batch).loss, (scores,)
    )


def test_local_head_cross_entropy_by_hand():
    scores = random_scores(LENGTHS, seed=6)
    label_scores = random_scores(LENGTHS, labels=2, seed=7)
    heads = [[2, -1, 2], [0, 1]]
    batch = make_batch(LENGTHS, heads=heads, rels=RELS)
    out = LocalHeadCrossEntropy()(ParserOutput(TreeCRF(scores, batch.lengths), label_scores), batch)
    head_nll = label_nll = 0.0
    for b, n in enumerate(LENGTHS):
        for d in range(1, n + 1):
            gold = heads[b][d - 1]
            if gold < 0:
                continue
            candidates = [h for h in range(n + 1) if h != d]
            row = scores[b, d, candidates].log_softmax(0)
            head_nll -= row[candidates.index(gold)]
            label_nll -= label_scores[b, d, gold].log_softmax(0)[RELS[b][d - 1]]
    torch.testing.assert_close(out.loss, (head_nll + label_nll) / 5)
    torch.testing.assert_close(out.logs["head_nll"], (head_nll / 5).detach())


def test_local_joint_is_softmax_over_head_label_pairs():
    scores = random_scores(LENGTHS, labels=2, seed=8)
    batch = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    out = LocalHeadCrossEntropy()(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    total = 0.0
    for b, n in enumerate(LENGTHS):
        for d in range(1, n + 1):
            candidates = [h for h in range(n + 1) if h != d]
            flat = scores[b, d, candidates].reshape(-1).log_softmax(0).view(len(candidates), 2)
            total -= flat[candidates.index(HEADS[b][d - 1]), RELS[b][d - 1]]
    torch.testing.assert_close(out.loss, total / 5)


@pytest.mark.parametrize("objective", [Likelihood(), LocalHeadCrossEntropy()])
def test_unlabeled_batch_is_rejected(objective):
    batch = make_batch(LENGTHS)
    scores = random_scores(LENGTHS)
    with pytest.raises(ValueError, match="labeled batch.*batch.heads is None"):
        objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch)


def test_bad_gold_head_is_named():
    batch = make_batch(LENGTHS, heads=[[2, 0, 4], [0, 1]], rels=RELS)
    scores = random_scores(LENGTHS)
    with pytest.raises(ValueError, match=r"batch.heads\[0, 3\] = 4"):
        Likelihood()(ParserOutput(TreeCRF(scores, batch.lengths)), batch)


@pytest.mark.parametrize("objective", [Likelihood(), LocalHeadCrossEntropy()])
def test_batched_equals_one_sentence_at_a_time(objective):
    scores = random_scores(LENGTHS, labels=2, seed=9)
    batch = make_batch(LENGTHS, heads=[[2, -1, 2], [0, 1]], rels=RELS)
    total = objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch).loss * 5
    pieces = 0.0
    for b, n in enumerate(LENGTHS):
        one = make_batch([n], heads=[batch.heads[b, 1 : n + 1].tolist()], rels=[RELS[b]])
        alone = scores[b : b + 1, : n + 1, : n + 1]
        pieces = pieces + objective(ParserOutput(TreeCRF(alone, one.lengths)), one).loss * n
    torch.testing.assert_close(total, pieces)
