"""Estimated-target GE constraints: hand-counted proportions and weights on the four trees of
tests/fixtures/estimate-trees.conllu, the templates' support threshold and direction, and targets
that mean what the GE model proportion means.

The fixture's attachments (child -> parent, direction: ``left`` when the head precedes the child):
  1. DET->NOUN right, NOUN->VERB right, VERB->ROOT, PUNCT->VERB left
  2. DET->NOUN right, ADJ->NOUN right, NOUN->VERB right, VERB->ROOT, PUNCT->VERB left
  3. NOUN->VERB right, VERB->ROOT, ADV->VERB left
  4. NOUN->ROOT, CCONJ->NOUN right, NOUN->NOUN left, PUNCT->NOUN left
Child words: NOUN 5, VERB 3, PUNCT 3, DET 2, ADJ 1, ADV 1, CCONJ 1. Pattern counts: NOUN->VERB
right 3, VERB->ROOT 3, DET->NOUN right 2, PUNCT->VERB left 2, the six others 1.
"""

from __future__ import annotations

import pytest
import torch

from parser.constraints import (
    UPOS_TAGS,
    ConstraintSet,
    ConstraintSpecError,
    EstimateOptions,
    estimated_constraints,
    estimated_set,
    gold_counts,
    parse_spec,
    template_constraints,
)
from parser.data.conllu_io import read_conllu
from parser.objectives import GeneralizedExpectation, ParserOutput
from parser.structs import TreeCRF
from tests.conftest import FIXTURES
from tests.objectives.helpers import make_batch

NAMES = ("<pad>", "<unk>", "<root>", *UPOS_TAGS)
SENTENCES = read_conllu(FIXTURES / "estimate-trees.conllu").sentences
HEADS = [s.heads for s in SENTENCES]
UPOS = [s.upos for s in SENTENCES]

SET = parse_spec(
    [
        {"child": "DET", "parent": ["NOUN", "PROPN"], "target": 0.9},  # 2 of 2
        {"child": "PUNCT", "parent": "VERB", "target": 0.5},  # 2 of 3
        {"child": "CCONJ", "direction": "right", "target": 1.0, "bound": "lower"},  # 1 of 1
        {"child": "ADP", "parent": "NOUN", "target": 0.75},  # no ADP: dropped
        {"child": ["ADJ", "ADV"], "parent": "ROOT", "target": 0.0},  # 0 of 2
        {"child": "PUNCT", "grandparent": "ROOT", "target": 0.9},  # second order: 3 of 3
        {"child": ["ADP", "AUX"], "parent": ["NOUN", "VERB"], "direction": "consistent"},
    ],
    source="test set",
)


def test_gold_counts_by_hand():
    fired, words = gold_counts(SET, HEADS, UPOS, upos_names=NAMES)
    assert fired.tolist() == [2, 2, 1, 0, 0, 3, 0]
    assert words.tolist() == [2, 3, 1, 0, 2, 3, 0]  # a consistent constraint's column counts none


def test_set_targets_are_smoothed_towards_the_written_target_and_weighted_by_count():
    options = EstimateOptions(features="set", smoothing=1.0, kappa=10.0)
    estimated = {c.name: c for c in estimated_constraints(SET, HEADS, UPOS, options=options, upos_names=NAMES)}
    expected = {  # (c + alpha * written target) / (n + alpha), n / (n + kappa)
        "DET->NOUN|PROPN": ((2 + 0.9) / 3, 2 / 12),
        "PUNCT->VERB": ((2 + 0.5) / 4, 3 / 13),
        "CCONJ->*:right": ((1 + 1.0) / 2, 1 / 11),
        "ADJ|ADV->ROOT": (0.0, 2 / 12),
        "PUNCT->*->ROOT": ((3 + 0.9) / 4, 3 / 13),
    }
    for name, (target, weight) in expected.items():
        assert estimated[name].target == pytest.approx(target, rel=1e-12), name
        assert estimated[name].weight == pytest.approx(weight, rel=1e-12), name
        assert estimated[name].bound == "equal"  # a measured proportion is two-sided
    assert "ADP->NOUN" not in estimated  # no ADP in the labeled trees: nothing to estimate
    harmony = estimated["ADP|AUX->NOUN|VERB:consistent"]
    assert harmony == SET[-1]  # no target: kept as written


def test_no_smoothing_gives_the_raw_proportions_and_no_confidence_gives_weight_one():
    options = EstimateOptions(features="set", smoothing=0.0, confidence="none")
    estimated = {c.name: c for c in estimated_constraints(SET, HEADS, UPOS, options=options, upos_names=NAMES)}
    assert estimated["PUNCT->VERB"].target == pytest.approx(2 / 3)
    assert estimated["DET->NOUN|PROPN"].target == 1.0
    assert {c.weight for c in estimated.values()} == {1.0}


def test_templates_keep_the_supported_patterns_with_their_direction():
    names = [t.name for t in template_constraints(HEADS, UPOS, min_count=2, upos_names=NAMES)]
    # support 3 (ties by (parent, child, direction)), then support 2
    assert names == ["VERB->ROOT", "NOUN->VERB:right", "DET->NOUN:right", "PUNCT->VERB:left"]
    assert len(template_constraints(HEADS, UPOS, min_count=1, upos_names=NAMES)) == 10
    assert template_constraints(HEADS, UPOS, min_count=4, upos_names=NAMES) == ()
    by_name = {t.name: t for t in template_constraints(HEADS, UPOS, min_count=1, upos_names=NAMES)}
    assert by_name["NOUN->NOUN:left"].direction == "left"  # dogs (3) -> Cats (1): head precedes
    assert by_name["CCONJ->NOUN:right"].direction == "right"  # and (2) -> dogs (3): head follows
    assert by_name["NOUN->ROOT"].direction == "any"
    assert "NOUN->NOUN:right" not in by_name
    with pytest.raises(ValueError, match="min_count"):
        template_constraints(HEADS, UPOS, min_count=0, upos_names=NAMES)


def test_template_targets_and_weights_by_hand():
    options = EstimateOptions(features="templates", min_count=2, smoothing=1.0, kappa=10.0, prior=0.5)
    estimated = {c.name: c for c in estimated_constraints((), HEADS, UPOS, options=options, upos_names=NAMES)}
    expected = {
        "VERB->ROOT": (3.5 / 4, 3 / 13),
        "NOUN->VERB:right": (3.5 / 6, 5 / 15),
        "DET->NOUN:right": (2.5 / 3, 2 / 12),
        "PUNCT->VERB:left": (2.5 / 4, 3 / 13),
    }
    assert set(estimated) == set(expected)
    for name, (target, weight) in expected.items():
        assert (estimated[name].target, estimated[name].weight) == pytest.approx((target, weight), rel=1e-12)


def test_both_leaves_out_a_template_named_like_a_set_constraint():
    base = parse_spec([{"child": "VERB", "parent": "ROOT", "target": 0.75}, *[{"child": "DET", "target": 1.0}]],
                      source="test")
    options = EstimateOptions(features="both", min_count=2)
    estimated = estimated_constraints(base, HEADS, UPOS, options=options, upos_names=NAMES)
    names = [c.name for c in estimated]
    assert names == ["VERB->ROOT", "DET->*", "NOUN->VERB:right", "DET->NOUN:right", "PUNCT->VERB:left"]
    assert estimated[0].target == pytest.approx((3 + 0.75) / 4)  # the set's, with its written prior


def test_unannotated_words_and_unknown_tags_are_no_child():
    constraints = parse_spec([{"child": "DET", "parent": "NOUN", "target": 0.5},
                              {"child": "NOUN", "target": 0.5}, {"child": "PUNCT", "target": 0.5}], source="test")
    heads = [[2, -1, 0, 3]]  # the NOUN's head is unannotated
    upos = [["DET", "NOUN", "VERB", None]]  # the last word has no UPOS
    fired, words = gold_counts(constraints, heads, upos, upos_names=NAMES)
    assert fired.tolist() == [1, 0, 0] and words.tolist() == [1, 0, 0]
    ids = [[NAMES.index(t) for t in s] for s in UPOS]
    by_id = gold_counts(SET, HEADS, ids, upos_names=NAMES)
    assert all(torch.equal(a, b) for a, b in zip(by_id, gold_counts(SET, HEADS, UPOS, upos_names=NAMES)))


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="sentence 0, word 2: head 9 out of range"):
        gold_counts(SET, [[0, 9]], [["VERB", "NOUN"]], upos_names=NAMES)
    with pytest.raises(ValueError, match="sentence 0 has 2 heads but 1 UPOS"):
        gold_counts(SET, [[0, 1]], [["VERB"]], upos_names=NAMES)
    with pytest.raises(ConstraintSpecError, match="no labeled sentences"):
        gold_counts(SET, [], [], upos_names=NAMES)
    with pytest.raises(ConstraintSpecError, match="no constraint has a child word"):
        estimated_constraints(SET[3:4], HEADS, UPOS, options=EstimateOptions(), upos_names=NAMES)
    with pytest.raises(ValueError, match="features must be one of"):
        EstimateOptions(features="ud")
    with pytest.raises(ValueError, match="'oracle' is estimated already"):
        estimated_set("oracle", NAMES, heads=HEADS, upos=UPOS, options=EstimateOptions())


def test_estimated_set_of_a_builtin_set_binds_to_the_vocabulary():
    options = EstimateOptions(features="both", min_count=2)
    constraints = estimated_set("ud_universal", NAMES, heads=HEADS, upos=UPOS, options=options)
    assert isinstance(constraints, ConstraintSet) and constraints.source == "estimated(ud_universal, both)"
    assert constraints.names[-1] == "PUNCT->VERB:left"
    assert bool((constraints.column_weights[: len(constraints)] < 1).all())


def test_unsmoothed_targets_equal_the_ge_proportions_of_the_gold_trees():
    """A target means what GE's model proportion means: at a distribution peaked on the gold trees,
    m_k equals c_k / n_k for every constraint (first and second order)."""
    options = EstimateOptions(features="both", min_count=1, smoothing=0.0)
    constraints = estimated_constraints(SET, HEADS, UPOS, options=options, upos_names=NAMES)
    bound = ConstraintSet(constraints, NAMES)
    ids = [[NAMES.index(t) for t in s] for s in UPOS]
    batch = make_batch([len(h) for h in HEADS], heads=HEADS, upos=ids)
    scores = torch.full((len(HEADS), 6, 6), -40.0, dtype=torch.float64)
    for b, heads in enumerate(HEADS):
        for dep, head in enumerate(heads, start=1):
            scores[b, dep, head] = 40.0
    ge = GeneralizedExpectation(bound)
    model, active = ge.proportions(ge.aggregate_of(ParserOutput(TreeCRF(scores, batch.lengths)), batch))
    k = len(bound)
    mask = bound.proportions_mask[:k]
    assert bool(active[:k][mask].all())
    assert model[:k][mask] == pytest.approx(bound.targets[mask], abs=1e-9)
    assert float(ge.loss_of(ge.aggregate_of(ParserOutput(TreeCRF(scores, batch.lengths)), batch)).loss) < 1e-12
