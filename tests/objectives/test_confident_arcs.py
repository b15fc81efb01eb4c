"""Self-training on the teacher's confident arcs: the partial-tree likelihood against brute-force
enumeration, its edge cases (nothing kept, everything kept), gradients, padding invariance, and
the config through the trainer."""

from __future__ import annotations

import math

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from parser.config import config_dir, register_configs
from parser.objectives import ConfidentArcs, KLToTeacher, ParserOutput, resolve_terms
from parser.objectives.confident_arcs import kept_arcs
from parser.objectives.registry import Resources
from parser.train.loop import Trainer
from tests.objectives.brute_ref import probabilities
from tests.objectives.helpers import TreeCRF, make_batch, random_scores
from tests.train.helpers import tiny_config

LENGTHS = [4, 3, 2]


def _teacher_scores():
    """Peaked teacher scores for sentence 0 (confident arcs), flat ones for sentence 2 (none)."""
    scores = random_scores(LENGTHS, seed=61, scale=3.0).detach()
    scores[2] = 0.0
    return scores


def _teacher(scores):
    """A teacher reading its scores at the batch's sentences (by ``batch.index``), at the batch's width."""

    def teacher(batch):
        width = batch.words.shape[1]
        return ParserOutput(TreeCRF(scores[batch.index][:, :width, :width], batch.lengths))

    return teacher


def _batch(rows=(0, 1, 2)):
    return make_batch([LENGTHS[r] for r in rows], index=list(rows))


def brute_kept(teacher_scores, n, *, threshold, top_share):
    """The teacher's best tree (heads over words 1..n) and the set of its kept words, by enumeration."""
    items, p = probabilities(teacher_scores[: n + 1, : n + 1], n, single_root=True)
    trees = [tree for tree, _ in items]
    best = trees[int(p.argmax())]
    confidence = [sum(float(pt) for tree, pt in zip(trees, p) if tree[d] == best[d]) for d in range(n)]
    kept = {d for d in range(n) if threshold is None or confidence[d] >= threshold}
    if top_share is not None:
        order = sorted(range(n), key=lambda d: (-confidence[d], d))
        kept &= set(order[: math.floor(top_share * n + 0.5)])
    return best, kept


def brute_loss(student, teacher_scores, lengths, *, threshold, top_share):
    """``-sum_b log sum_{trees with the kept arcs} p_model(tree) / words`` and the number kept."""
    total, n_kept = 0.0, 0
    for b, n in enumerate(lengths):
        best, kept = brute_kept(teacher_scores[b], n, threshold=threshold, top_share=top_share)
        n_kept += len(kept)
        if not kept:
            continue
        items, p = probabilities(student[b, : n + 1, : n + 1], n, single_root=True)
        mass = sum(pt for (tree, _), pt in zip(items, p) if all(tree[d] == best[d] for d in kept))
        total = total - torch.log(mass)
    return total / sum(lengths), n_kept


@pytest.mark.parametrize(
    ("threshold", "top_share"), [(0.9, None), (0.6, None), (0.0, None), (None, 0.5), (0.6, 0.5), (1.0, None)]
)
def test_loss_matches_enumeration(threshold, top_share):
    teacher_scores = _teacher_scores()
    student = random_scores(LENGTHS, seed=62)
    batch = _batch()
    out = ConfidentArcs(_teacher(teacher_scores), threshold=threshold, top_share=top_share)(
        ParserOutput(TreeCRF(student, batch.lengths)), batch
    )
    want, n_kept = brute_loss(student, teacher_scores, LENGTHS, threshold=threshold, top_share=top_share)
    torch.testing.assert_close(out.loss, torch.as_tensor(want, dtype=torch.float64))
    assert float(out.logs["kept"]) == pytest.approx(n_kept / sum(LENGTHS))
    if (threshold, top_share) == (0.6, None):
        assert 0 < n_kept < sum(LENGTHS)  # a partial tree: the case the term exists for


def test_every_arc_kept_is_hard_self_training_on_the_1best():
    """threshold 0 (or top_share 1) keeps the teacher's whole best tree, the only tree containing
    its arcs: the loss is kl with tree='mst', -log p_model(1-best) per word, labeled models too."""
    teacher_scores = _teacher_scores()
    batch = _batch()
    hard = KLToTeacher(_teacher(teacher_scores), tree="mst")
    for labels in (None, 3):
        student = random_scores(LENGTHS, labels=labels, seed=63)
        out = ParserOutput(TreeCRF(student, batch.lengths))
        want = hard(out, batch).loss
        for options in ({"threshold": 0.0}, {"threshold": None, "top_share": 1.0}):
            got = ConfidentArcs(_teacher(teacher_scores), **options)(out, batch)
            torch.testing.assert_close(got.loss, want)
            assert float(got.logs["kept"]) == 1.0


def test_no_arc_kept_contributes_exactly_zero():
    teacher_scores = _teacher_scores()
    student = random_scores(LENGTHS, seed=64)
    objective = ConfidentArcs(_teacher(teacher_scores), threshold=0.9)
    flat = _batch((2,))  # uniform teacher: every marginal is 1/2 or less
    out = objective(ParserOutput(TreeCRF(student[2:, :3, :3], flat.lengths)), flat)
    assert float(out.loss.detach()) == 0.0 and float(out.logs["kept"]) == 0.0
    out.loss.backward()
    assert float(student.grad.abs().sum()) == 0.0
    # top_share 0 keeps nothing anywhere.
    batch = _batch()
    none = ConfidentArcs(_teacher(teacher_scores), threshold=None, top_share=0.0)
    assert float(none(ParserOutput(TreeCRF(student.detach(), batch.lengths)), batch).loss.detach()) == 0.0


def test_gradcheck():
    teacher_scores = _teacher_scores()
    batch = _batch()
    objective = ConfidentArcs(_teacher(teacher_scores), threshold=0.6)
    student = random_scores(LENGTHS, seed=65)
    torch.autograd.gradcheck(lambda s: objective(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (student,))


@pytest.mark.parametrize(("threshold", "top_share"), [(0.6, None), (None, 0.5)])
def test_batched_equals_one_sentence_at_a_time(threshold, top_share):
    """Padding changes nothing: the batch's summed loss (loss x words) is the sum of each sentence's."""
    teacher_scores = _teacher_scores()
    student = random_scores(LENGTHS, seed=66).detach()
    objective = ConfidentArcs(_teacher(teacher_scores), threshold=threshold, top_share=top_share)
    batch = _batch()
    together = objective(ParserOutput(TreeCRF(student, batch.lengths)), batch).loss * sum(LENGTHS)
    alone = 0.0
    for b, n in enumerate(LENGTHS):
        one = _batch((b,))
        alone = alone + objective(ParserOutput(TreeCRF(student[b : b + 1, : n + 1, : n + 1], one.lengths)), one).loss * n
    torch.testing.assert_close(together, alone)


def test_kept_arcs_ranks_ties_by_position_and_rounds_the_quota_half_up():
    confidence = torch.tensor([[0.0, 0.5, 0.9, 0.5, 0.2]])
    words = torch.tensor([[False, True, True, True, True]])
    share = kept_arcs(confidence, words, threshold=None, top_share=0.5)  # round(2.0) = 2: 0.9, then the first 0.5
    assert share.tolist() == [[False, True, True, False, False]]
    three = kept_arcs(confidence[:, :4], words[:, :4], threshold=None, top_share=0.5)  # round(1.5) = 2
    assert three.tolist() == [[False, True, True, False]]
    both = kept_arcs(confidence, words, threshold=0.6, top_share=0.5)
    assert both.tolist() == [[False, False, True, False, False]]


def test_bad_options_are_named():
    teacher = _teacher(_teacher_scores())
    with pytest.raises(ValueError, match="threshold and/or top_share"):
        ConfidentArcs(teacher, threshold=None)
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\], got 1.5"):
        ConfidentArcs(teacher, threshold=1.5)
    with pytest.raises(ValueError, match=r"top_share must be in \[0, 1\], got -0.1"):
        ConfidentArcs(teacher, top_share=-0.1)
    with pytest.raises(ValueError, match="tree must be one of"):
        ConfidentArcs(teacher, tree="eisner")
    with pytest.raises(ValueError, match="needs teacher="):
        resolve_terms({"confident_arcs": {"checkpoint": "t.pt"}})[0].build(Resources())


def _compose(*overrides):
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize("treebank", ["en_ewt", "de_gsd"])
def test_the_config_composes_with_the_ssl_family_and_any_treebank(treebank):
    cfg = _compose("experiment=ssl_ewt", f"data={treebank}", "objective=confident_arcs",
                   "objective.terms.confident_arcs.threshold=0.8", "objective.terms.confident_arcs.top_share=0.5",
                   "objective.terms.confident_arcs.checkpoint=teacher.pt")
    assert list(cfg.objective.terms) == ["likelihood", "confident_arcs"]
    terms = {term.name: term for term in resolve_terms(OmegaConf.to_container(cfg.objective.terms))}
    options = terms["confident_arcs"].options
    assert (options.threshold, options.top_share, options.tree) == (0.8, 0.5, "mst")
    assert terms["confident_arcs"].stream == "unlabeled" and terms["confident_arcs"].weight == 3.0


STEPS = ["trainer.max_steps=4", "trainer.eval_every=4", "trainer.final_eval=false", "data.labeled_size=8"]


def test_the_trainer_self_trains_on_confident_arcs(tmp_path):
    Trainer(tiny_config(*STEPS, "objective=likelihood"), run_dir=tmp_path / "teacher").fit()
    checkpoint = tmp_path / "teacher" / "checkpoints" / "best.pt"
    student = Trainer(tiny_config(*STEPS, "objective=confident_arcs", "objective.terms.confident_arcs.warmup=0",
                                  "objective.terms.confident_arcs.threshold=0.5",
                                  f"objective.terms.confident_arcs.checkpoint={checkpoint}"),
                      run_dir=tmp_path / "student")
    assert student.fit().nonfinite_total == 0
    assert student.task.objective.names == ["likelihood", "confident_arcs"]
    # Two self-training terms with different teachers: refused, not one teacher for both.
    with pytest.raises(ValueError, match="a run has one teacher"):
        Trainer(tiny_config(*STEPS, "objective=[kl,confident_arcs]", f"objective.terms.kl.checkpoint={checkpoint}",
                            f"objective.terms.confident_arcs.checkpoint={tmp_path / 'other.pt'}"),
                run_dir=tmp_path / "two")
