"""GE with rule-set constraints (Naseem et al. 2010) and one-sided bounds: features against an
independent reading, loss against enumeration, gradients against finite differences."""

from __future__ import annotations

import pytest
import torch

from parser.constraints import ConstraintSet, parse_spec
from parser.objectives import GeneralizedExpectation, ParserOutput
from tests.objectives.ge_brute import brute_expectations, divergences, fires
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

NAMES = ["<pad>", "<unk>", "<root>", "DET", "NOUN", "VERB", "ADP", "PUNCT"]
RULES = [["DET", "NOUN"], ["NOUN", "VERB"], ["ADP", "NOUN"], ["VERB", "ROOT"], ["NOUN", "ROOT"]]
SENTENCES = [["DET", "NOUN", "VERB", "PUNCT"], ["NOUN", "VERB"], ["VERB", "ADP", "DET", "NOUN"]]
LENGTHS = [4, 2, 4]


def spec(bound_rules, bound_verb, target_rules=0.8, target_verb=0.5):
    return [
        {"rules": RULES, "target": target_rules, "bound": bound_rules},
        {"child": ["DET", "NOUN", "VERB"], "rules": [["DET", "NOUN"], ["NOUN", "VERB"]], "target": 0.5},
        {"child": "VERB", "parent": "ROOT", "target": target_verb, "bound": bound_verb},
        {"child": "NOUN", "parent": "VERB", "target": 0.5},
    ]


def ids(sentences):
    return [[NAMES.index(tag) for tag in sentence] for sentence in sentences]


def brute_proportions(scores, constraints):
    """``[K]`` model proportions by enumerating every tree of every sentence."""
    expected, counts = brute_expectations(scores, constraints, SENTENCES)
    return expected / counts


def test_rule_features_fire_exactly_on_the_listed_pairs():
    constraints = ConstraintSet(parse_spec(spec("lower", "equal"), source="t"), NAMES)
    batch = make_batch(LENGTHS, upos=ids(SENTENCES))
    features = constraints.features(batch.upos, batch.lengths)
    found = {tuple(row) + (int(k),) for row, k in zip(features.arc_index.tolist(), features.feature_ids)}
    expected = {
        (b, dep, head, j)
        for b, tags in enumerate(SENTENCES)
        for j, c in enumerate(constraints.constraints)
        for dep in range(1, len(tags) + 1)
        for head in range(len(tags) + 1)
        if head != dep and fires(c, tags, dep, head)
    }
    assert found == expected
    # Rules over all words: PUNCT counts in the normaliser though no rule has it as a child.
    assert features.counts.tolist() == [[4, 3, 1, 1], [2, 2, 1, 1], [4, 3, 1, 1]]
    # Sentence 0 by hand: DET->NOUN, NOUN->VERB, VERB->ROOT, NOUN->ROOT fire for the rules.
    rows = features.arc_index[(features.feature_ids == 0) & (features.arc_index[:, 0] == 0)].tolist()
    assert sorted(rows) == [[0, 1, 2], [0, 2, 0], [0, 2, 3], [0, 3, 0]]


@pytest.mark.parametrize("criterion", ["squared", "kl"])
@pytest.mark.parametrize("bound_rules, bound_verb", [("lower", "upper"), ("upper", "lower"), ("equal", "equal")])
def test_one_sided_loss_matches_enumeration(criterion, bound_rules, bound_verb):
    scores = random_scores(LENGTHS, seed=41)
    batch = make_batch(LENGTHS, upos=ids(SENTENCES))
    constraints = ConstraintSet(parse_spec(spec(bound_rules, bound_verb), source="t"), NAMES)
    out = GeneralizedExpectation(constraints, criterion=criterion)(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    model = brute_proportions(scores.detach(), constraints)
    target = constraints.targets
    divergence = divergences(model, target, criterion)
    keep = []
    for c, m, t in zip(constraints.constraints, model.tolist(), target.tolist()):
        keep.append(c.bound == "equal" or (c.bound == "lower" and m < t) or (c.bound == "upper" and m > t))
    keep = torch.tensor(keep)
    if bound_rules != "equal":
        assert 0 < int(keep.sum()) < len(keep)  # the data leave one bound satisfied, one violated
    torch.testing.assert_close(out.loss, divergence[keep].sum())
    error = (target - model).abs()[keep].sum() / len(keep)
    torch.testing.assert_close(out.logs["mean_abs_error"], error)


def test_satisfied_bounds_cost_nothing_and_pass_no_gradient():
    scores = random_scores(LENGTHS, seed=42)
    batch = make_batch(LENGTHS, upos=ids(SENTENCES))
    loose = [{"rules": RULES, "target": 0.0, "bound": "lower"}, {"child": "VERB", "parent": "ROOT", "target": 1.0, "bound": "upper"}]
    constraints = ConstraintSet(parse_spec(loose, source="t"), NAMES)
    out = GeneralizedExpectation(constraints, criterion="kl")(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    assert float(out.loss.detach()) == 0.0
    out.loss.backward()
    assert scores.grad is None or float(scores.grad.abs().sum()) == 0.0


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_one_sided_gradient_matches_finite_differences(criterion):
    batch = make_batch(LENGTHS, upos=ids(SENTENCES))
    # Targets far from the model's proportions keep every bound on one side within the step.
    constraints = ConstraintSet(parse_spec(spec("lower", "upper", 0.95, 0.05), source="t"), NAMES)
    objective = GeneralizedExpectation(constraints, criterion=criterion)
    scores = random_scores(LENGTHS, seed=43)
    torch.autograd.gradcheck(lambda s: objective(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (scores,))


def test_a_lower_bound_is_met_on_a_toy_problem():
    batch = make_batch(LENGTHS, upos=ids(SENTENCES))
    constraints = ConstraintSet(parse_spec([{"rules": RULES, "target": 0.75, "bound": "lower"}], source="t"), NAMES)
    objective = GeneralizedExpectation(constraints, criterion="squared")
    scores = torch.zeros(3, 5, 5, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.Adam([scores], lr=0.3)
    for _ in range(40):
        optimiser.zero_grad()
        objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch).loss.backward()
        optimiser.step()
    model = brute_proportions(scores.detach(), constraints)
    assert model[0] > 0.74, model  # uniform trees start near 0.35
