"""Second-order GE constraints (``grandparent``) and child positions (``position``): parsing, the
arc pairs they fire on, the loss against enumeration of every tree, the gradient, and a target
met on a toy problem."""

from __future__ import annotations

import pytest
import torch

from parser.constraints import ConstraintSet, parse_spec
from parser.constraints.spec import ConstraintSpecError
from parser.objectives import GeneralizedExpectation, ParserOutput
from tests.objectives.ge_brute import brute_expectations, divergences
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

NAMES = ["<pad>", "<unk>", "<root>", "NOUN", "VERB", "PUNCT", "DET"]
SPEC = [
    {"child": "PUNCT", "position": "last", "grandparent": "ROOT", "target": 0.9, "name": "final-punct"},
    {"child": "DET", "parent": "NOUN", "grandparent": ["VERB"], "direction": "right", "target": 0.5},
    {"child": "NOUN", "position": "first", "parent": "VERB", "target": 0.5},  # first order
    {"child": "VERB", "parent": "ROOT", "target": 0.75},
]
SENTENCES = [["DET", "NOUN", "VERB", "PUNCT"], ["VERB", "DET", "NOUN", "PUNCT"], ["NOUN", "PUNCT", "VERB"]]
LENGTHS = [4, 4, 3]


def setup():
    constraints = ConstraintSet(parse_spec(SPEC, source="test"), NAMES)
    upos = [[NAMES.index(tag) for tag in sentence] for sentence in SENTENCES]
    return constraints, make_batch(LENGTHS, upos=upos)


def test_parse_and_describe():
    final, det = parse_spec(SPEC, source="test")[:2]
    assert final.grandparent == ("ROOT",) and final.position == "last" and final.second_order
    assert det.describe() == "DET->NOUN->VERB:right"
    assert parse_spec([{"child": "DET", "position": "first", "target": 0.1}], source="t")[0].describe() == "DET->*:first"


@pytest.mark.parametrize("entry, message", [
    ({"child": "DET", "parent": "ROOT", "grandparent": "VERB", "target": 0.5}, "word head"),
    ({"rules": [["DET", "NOUN"]], "grandparent": "VERB", "target": 0.5}, "word head"),
    ({"child": "DET", "grandparent": "ADJECTIVE", "target": 0.5}, "unknown UPOS 'ADJECTIVE' in grandparent"),
    ({"child": "DET", "position": "middle", "target": 0.5}, "position must be one of"),
    ({"child": "DET", "direction": "consistent", "grandparent": "VERB"}, "first order"),
])
def test_bad_second_order_constraints_are_rejected(entry, message):
    with pytest.raises(ConstraintSpecError, match=message):
        parse_spec([entry], source="spec.yaml")


def test_pairs_and_counts():
    constraints, batch = setup()
    features = constraints.features(batch.upos, batch.lengths)
    pairs = {(tuple(f), tuple(s), int(k)) for f, s, k in
             zip(features.pair_first.tolist(), features.pair_second.tolist(), features.pair_feature_ids)}
    # Sentence 0: the final PUNCT (4) on word h, h on ROOT, h in 1..3; DET (1) -> NOUN (2) -> VERB (3).
    assert {p for p in pairs if p[0][0] == 0} == {
        ((0, 4, 1), (0, 1, 0), 0), ((0, 4, 2), (0, 2, 0), 0), ((0, 4, 3), (0, 3, 0), 0),
        ((0, 1, 2), (0, 2, 3), 1),
    }
    # Sentence 2 ends in a VERB: no final-punct pair; its DET-less words fire nothing of column 1.
    assert not any(p[0][0] == 2 for p in pairs)
    # Second-order columns have no first-order rows; position restricts the normaliser.
    assert set(features.feature_ids.tolist()) <= {2, 3}
    assert features.counts.tolist() == [[1, 1, 0, 1], [1, 1, 0, 1], [0, 0, 1, 1]]


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_loss_matches_enumeration(criterion):
    constraints, batch = setup()
    scores = random_scores(LENGTHS, seed=5)
    out = GeneralizedExpectation(constraints, criterion=criterion)(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    expected, counts = brute_expectations(scores.detach(), constraints, SENTENCES)
    model, target = expected / counts, constraints.targets
    torch.testing.assert_close(out.loss.detach(), divergences(model, target, criterion).sum())
    assert out.logs["active"] == 4


def test_gradcheck():
    constraints, batch = setup()
    objective = GeneralizedExpectation(constraints, criterion="kl")
    scores = random_scores(LENGTHS, seed=8)
    assert torch.autograd.gradcheck(lambda s: objective(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (scores,))


def test_final_punct_target_met_on_a_toy_problem():
    spec = [{"child": "PUNCT", "position": "last", "grandparent": "ROOT", "target": 0.95}]
    constraints = ConstraintSet(parse_spec(spec, source="toy"), NAMES)
    sentences = [["NOUN", "VERB", "DET", "NOUN", "PUNCT"], ["VERB", "NOUN", "PUNCT"]]
    batch = make_batch([5, 3], upos=[[NAMES.index(t) for t in s] for s in sentences])
    scores = torch.zeros(2, 6, 6, dtype=torch.float64, requires_grad=True)
    objective = GeneralizedExpectation(constraints, criterion="kl")
    before = objective.proportions(objective.aggregate_of(ParserOutput(TreeCRF(scores.detach(), batch.lengths)), batch))[0]
    optimiser = torch.optim.Adam([scores], lr=0.3)
    for _ in range(60):
        optimiser.zero_grad()
        objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch).loss.backward()
        optimiser.step()
    after = objective.proportions(objective.aggregate_of(ParserOutput(TreeCRF(scores.detach(), batch.lengths)), batch))[0]
    assert before[0] < 0.5 and abs(float(after[0]) - 0.95) < 0.03, (before, after)


def test_second_order_needs_a_distribution_with_pair_marginals():
    from parser.structs import ProjectiveTreeCRF

    constraints, batch = setup()
    out = ParserOutput(ProjectiveTreeCRF(random_scores(LENGTHS, seed=3), batch.lengths))
    with pytest.raises(ValueError, match="ProjectiveTreeCRF does not give.*model.crf=matrix_tree"):
        GeneralizedExpectation(constraints)(out, batch)
