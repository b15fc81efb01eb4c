"""Risk, entropy and KL-to-teacher against brute-force enumeration, and their gradients."""

from __future__ import annotations

import pytest
import torch

from parser.objectives import Entropy, KLToTeacher, ParserOutput, Risk
from parser.structs import ProjectiveTreeCRF
from tests.objectives.brute_ref import probabilities, structures
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

LENGTHS = [3, 2]
HEADS = [[2, 0, 2], [-1, 1]]
RELS = [[0, 1, -1], [1, 0]]


def brute_risk(scores, *, label_probs=None, labeled=False):
    """Summed expected errors over annotated words; ``label_probs [B, dep, head, L]`` for a
    classifier, joint labels when ``scores`` is labeled."""
    total = 0.0
    for b, n in enumerate(LENGTHS):
        items, p = probabilities(scores[b, : n + 1, : n + 1], n, single_root=True)
        for (tree, labels), pt in zip(items, p):
            errors = 0.0
            for d in range(1, n + 1):
                gold, rel = HEADS[b][d - 1], RELS[b][d - 1]
                if gold < 0:
                    continue
                right = float(tree[d - 1] == gold)
                if labeled and rel >= 0:
                    if labels is not None:
                        right *= float(labels[d - 1] == rel)
                    else:
                        right = right * label_probs[b, d, gold, rel]
                errors = errors + 1 - right
            total = total + pt * errors
    return total


def test_unlabeled_risk_matches_enumeration():
    scores = random_scores(LENGTHS, seed=11)
    batch = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    out = Risk()(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    torch.testing.assert_close(out.loss, brute_risk(scores) / 5)
    assert set(out.logs) == {"loss", "expected_errors"}


def test_joint_labeled_risk_matches_enumeration():
    scores = random_scores(LENGTHS, labels=2, seed=12)
    batch = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    out = Risk(labeled=True)(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    torch.testing.assert_close(out.loss, brute_risk(scores, labeled=True) / 5)
    unlabeled = Risk()(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    assert unlabeled.loss < out.loss


def test_classifier_labeled_risk_matches_enumeration():
    scores = random_scores(LENGTHS, seed=13)
    label_scores = random_scores(LENGTHS, labels=3, seed=14)
    batch = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    out = Risk(labeled=True)(ParserOutput(TreeCRF(scores, batch.lengths), label_scores), batch)
    expected = brute_risk(scores, label_probs=label_scores.softmax(-1), labeled=True)
    torch.testing.assert_close(out.loss, expected / 5)


def test_labeled_risk_needs_labels():
    batch = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    with pytest.raises(ValueError, match="labeled=True"):
        Risk(labeled=True)(ParserOutput(TreeCRF(random_scores(LENGTHS), batch.lengths)), batch)


def test_risk_rejects_unlabeled_batch():
    batch = make_batch(LENGTHS)
    with pytest.raises(ValueError, match="Risk needs a labeled batch"):
        Risk()(ParserOutput(TreeCRF(random_scores(LENGTHS), batch.lengths)), batch)


def test_risk_gradcheck():
    batch = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    scores = random_scores(LENGTHS, seed=15)
    torch.autograd.gradcheck(lambda s: Risk()(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (scores,))


def brute_entropy(scores, *, alpha=1.0, single_root=True):
    total = 0.0
    for b, n in enumerate(LENGTHS):
        _, p = probabilities(scores[b, : n + 1, : n + 1], n, single_root=single_root)
        if alpha == 1.0:
            total = total - (p * p.log()).sum()
        else:
            total = total + (p**alpha).sum().log() / (1 - alpha)
    return total


@pytest.mark.parametrize("alpha", [1.0, 2.0, 0.5])
@pytest.mark.parametrize("single_root", [True, False])
def test_entropy_matches_enumeration(alpha, single_root):
    scores = random_scores(LENGTHS, seed=16)
    batch = make_batch(LENGTHS)  # unlabeled text
    out = Entropy(alpha=alpha)(ParserOutput(TreeCRF(scores, batch.lengths, single_root=single_root)), batch)
    expected = brute_entropy(scores, alpha=alpha, single_root=single_root) / 5
    torch.testing.assert_close(out.loss, expected)
    torch.testing.assert_close(out.logs["value"], expected.detach())


def test_entropy_of_labeled_trees_matches_enumeration():
    scores = random_scores(LENGTHS, labels=2, seed=17)
    batch = make_batch(LENGTHS)
    out = Entropy()(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    torch.testing.assert_close(out.loss, brute_entropy(scores) / 5)


def test_entropy_gradcheck_and_bad_alpha():
    batch = make_batch(LENGTHS)
    scores = random_scores(LENGTHS, seed=18)
    torch.autograd.gradcheck(lambda s: Entropy()(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (scores,))
    with pytest.raises(ValueError, match="alpha"):
        Entropy(alpha=0.0)


def brute_kl(p_scores, q_scores):
    total = 0.0
    for b, n in enumerate(LENGTHS):
        _, lp = structures(p_scores[b, : n + 1, : n + 1], n, single_root=True)
        _, lq = structures(q_scores[b, : n + 1, : n + 1], n, single_root=True)
        lp, lq = lp.log_softmax(0), lq.log_softmax(0)
        total = total + (lp.exp() * (lp - lq)).sum()
    return total


@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_kl_to_teacher_matches_enumeration(direction):
    teacher_scores = random_scores(LENGTHS, seed=19).detach().requires_grad_()
    scores = random_scores(LENGTHS, seed=20)
    calls = []

    def teacher(batch):
        calls.append(torch.is_grad_enabled())
        return ParserOutput(TreeCRF(teacher_scores * 1.0, batch.lengths))

    batch = make_batch(LENGTHS)
    out = KLToTeacher(teacher, direction=direction)(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    if direction == "forward":
        expected = brute_kl(teacher_scores, scores)
    else:
        expected = brute_kl(scores, teacher_scores)
    torch.testing.assert_close(out.loss, expected / 5)
    assert calls == [False]  # the teacher runs under no_grad
    out.loss.backward()
    assert teacher_scores.grad is None and scores.grad.abs().sum() > 0


def test_kl_gradcheck_and_validation():
    teacher_scores = random_scores(LENGTHS, seed=21).detach()
    batch = make_batch(LENGTHS)
    objective = KLToTeacher(lambda b: ParserOutput(TreeCRF(teacher_scores, b.lengths)))
    scores = random_scores(LENGTHS, seed=22)
    torch.autograd.gradcheck(lambda s: objective(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (scores,))
    with pytest.raises(ValueError, match="direction"):
        KLToTeacher(objective.teacher, direction="both")
    labeled = random_scores(LENGTHS, labels=2)
    with pytest.raises(ValueError, match="do not match"):
        objective(ParserOutput(TreeCRF(labeled, batch.lengths)), batch)


def test_kl_to_the_teachers_best_tree():
    """tree='mst' / 'projective': -log p_model(teacher's best tree) per word, by enumeration; the
    projective pseudo-tree differs where the teacher's maximum spanning tree crosses."""
    from tests.structs.brute import enumerate_distribution

    n = 4
    teacher_scores = torch.full((1, n + 1, n + 1), -5.0, dtype=torch.float64)
    for dep, head in ((1, 3), (2, 4), (3, 0), (4, 3)):  # 1 <- 3 crosses 2 <- 4: not projective
        teacher_scores[0, dep, head] = 5.0
    scores = random_scores([n], seed=23)
    batch = make_batch([n])
    trees, log_weights, log_z = enumerate_distribution(scores[0].detach(), n, single_root=True)
    log_p = dict(zip(trees, (log_weights - log_z).tolist()))
    for tree in ("mst", "projective"):
        objective = KLToTeacher(lambda b: ParserOutput(TreeCRF(teacher_scores, b.lengths)), tree=tree)
        out = objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
        best = TreeCRF(teacher_scores, batch.lengths).argmax(projective=tree == "projective")
        pseudo = tuple(best[0, 1:].tolist())
        assert (pseudo == (3, 4, 0, 3)) == (tree == "mst")
        torch.testing.assert_close(out.loss, torch.tensor(-log_p[pseudo] / n, dtype=torch.float64))
        out.loss.backward()
        assert scores.grad.abs().sum() > 0
        scores.grad = None
    # A projective student gives the crossing pseudo-tree probability 0: refused, not an inf loss.
    student = ParserOutput(ProjectiveTreeCRF(scores.detach(), batch.lengths))
    with pytest.raises(ValueError, match="tree='mst' gave 1 pseudo-gold trees .* ProjectiveTreeCRF"):
        KLToTeacher(objective.teacher, tree="mst")(student, batch)
    assert torch.isfinite(KLToTeacher(objective.teacher, tree="projective")(student, batch).loss)
    with pytest.raises(ValueError, match="tree must be one of"):
        KLToTeacher(objective.teacher, tree="eisner")
    with pytest.raises(ValueError, match="needs direction 'forward'"):
        KLToTeacher(objective.teacher, direction="reverse", tree="mst")


def test_kl_to_the_teachers_decoded_tree():
    """tree='decoder': the pseudo-gold tree is whatever the teacher's decoder.decode(out, upos=) returns."""
    from tests.structs.brute import enumerate_distribution

    n = 4
    chosen = torch.tensor([[0, 2, 0, 2, 3]])

    class Teacher:
        def __init__(self):
            self.upos = None
            self.decoder = self  # a ParserModel's decoding policy (parser.models.decoder.Decoder)

        def __call__(self, batch):
            return ParserOutput(TreeCRF(torch.zeros(1, n + 1, n + 1, dtype=torch.float64), batch.lengths))

        def decode(self, out, upos=None):
            self.upos = upos
            return chosen, None

    teacher = Teacher()
    scores = random_scores([n], seed=24)
    batch = make_batch([n], upos=[[3, 4, 5, 6]])
    out = KLToTeacher(teacher, tree="decoder")(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    trees, log_weights, log_z = enumerate_distribution(scores[0].detach(), n, single_root=True)
    expected = -(log_weights[trees.index((2, 0, 2, 3))] - log_z) / n
    torch.testing.assert_close(out.loss, expected)
    assert torch.equal(teacher.upos, batch.upos)  # the decoder saw the batch's tags
    with pytest.raises(ValueError, match="decode"):
        KLToTeacher(lambda b: teacher(b), tree="decoder")(ParserOutput(TreeCRF(scores, batch.lengths)), batch)


def test_kl_to_the_teachers_tree_with_a_labeled_student():
    """A joint-label student learns the teacher's unlabeled tree: its labels are summed out."""
    lengths = [4, 3]
    teacher_scores = random_scores(lengths, seed=25).detach()
    student = random_scores(lengths, labels=3, seed=26)
    batch = make_batch(lengths)
    out = KLToTeacher(lambda b: ParserOutput(TreeCRF(teacher_scores, b.lengths)), tree="mst")(
        ParserOutput(TreeCRF(student, batch.lengths)), batch)
    heads = TreeCRF(teacher_scores, batch.lengths).argmax()
    unlabeled = TreeCRF(torch.logsumexp(student, -1), batch.lengths)
    torch.testing.assert_close(out.loss, -unlabeled.log_prob(heads).sum() / 7)
