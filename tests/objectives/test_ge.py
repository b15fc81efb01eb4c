"""Generalized expectation: model proportions against enumeration, both criteria, the corpus
cache, gradients, and targets met on a toy problem."""

from __future__ import annotations

import pytest
import torch

from parser.constraints import ConstraintSet, parse_spec
from parser.objectives import GeneralizedExpectation, ParserOutput
from tests.objectives.ge_brute import brute_expectations, divergences, fires
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

NAMES = ["<pad>", "<unk>", "<root>", "DET", "NOUN", "VERB", "ADP", "PUNCT"]
SPEC = [
    {"child": "DET", "parent": "NOUN", "direction": "right", "target": 0.9},
    {"child": "NOUN", "parent": "VERB", "target": 0.5},
    {"child": "VERB", "parent": "ROOT", "target": 1.0},
    {"child": ["NOUN", "ADP"], "parent": ["NOUN", "VERB"], "distance": [1, 1], "target": 0.25},
    {"child": "PUNCT", "target": 0.0},  # no PUNCT in the data: inactive
]
SENTENCES = [["DET", "NOUN", "VERB"], ["NOUN", "VERB"], ["VERB", "ADP", "NOUN"]]
LENGTHS = [3, 2, 3]


def constraint_set():
    return ConstraintSet(parse_spec(SPEC, source="test"), NAMES)


def upos_ids(sentences):
    return [[NAMES.index(tag) for tag in sentence] for sentence in sentences]


def test_features_fire_as_the_constraints_say():
    constraints = constraint_set()
    batch = make_batch(LENGTHS, upos=upos_ids(SENTENCES))
    features = constraints.features(batch.upos, batch.lengths)
    found = {tuple(row) + (int(k),) for row, k in zip(features.arc_index.tolist(), features.feature_ids)}
    expected = set()
    for b, tags in enumerate(SENTENCES):
        for j, c in enumerate(constraints.constraints):
            for dep in range(1, len(tags) + 1):
                for head in range(len(tags) + 1):
                    if head != dep and fires(c, tags, dep, head):
                        expected.add((b, dep, head, j))
    assert found == expected
    assert features.counts.tolist()[0] == [1, 1, 1, 1, 0]
    assert features.counts.tolist()[2] == [0, 1, 1, 2, 0]


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_ge_loss_matches_enumeration(criterion):
    constraints = constraint_set()
    scores = random_scores(LENGTHS, seed=31)
    batch = make_batch(LENGTHS, upos=upos_ids(SENTENCES))
    objective = GeneralizedExpectation(constraints, criterion=criterion)
    out = objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    expected, counts = brute_expectations(scores, constraints, SENTENCES)
    model = expected[:4] / counts[:4]
    target = constraints.targets[:4]
    torch.testing.assert_close(out.loss, divergences(model, target, criterion).sum())
    assert out.logs["active"] == 4
    torch.testing.assert_close(out.logs["mean_abs_error"], (target - model).abs().mean().detach())


def test_ge_gradcheck():
    constraints = constraint_set()
    batch = make_batch(LENGTHS, upos=upos_ids(SENTENCES))
    objective = GeneralizedExpectation(constraints, criterion="kl")
    scores = random_scores(LENGTHS, seed=32)
    torch.autograd.gradcheck(lambda s: objective(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (scores,))


def test_corpus_aggregate_replaces_cached_rows_with_live_values():
    constraints = constraint_set()
    objective = GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache")
    first = make_batch(LENGTHS[:2], upos=upos_ids(SENTENCES[:2]), index=[0, 1])
    second = make_batch(LENGTHS[2:], upos=upos_ids(SENTENCES[2:]), index=[2])
    s_first = random_scores(LENGTHS[:2], seed=33)
    s_second = random_scores(LENGTHS[2:], seed=34)
    objective.aggregate_of(ParserOutput(TreeCRF(s_first, first.lengths)), first)
    assert len(objective.cache) == 2
    aggregate = objective.aggregate_of(ParserOutput(TreeCRF(s_second, second.lengths)), second)
    e1, c1 = brute_expectations(s_first, constraints, SENTENCES[:2])
    e2, c2 = brute_expectations(s_second, constraints, SENTENCES[2:])
    torch.testing.assert_close(aggregate.expected, e1 + e2)
    torch.testing.assert_close(aggregate.counts, c1 + c2)
    # Only the live batch carries the gradient.
    aggregate.expected.sum().backward()
    assert s_first.grad is None and s_second.grad.abs().sum() > 0
    # Revisiting the first batch with new scores replaces its cached rows rather than adding.
    s_new = random_scores(LENGTHS[:2], seed=35)
    again = objective.aggregate_of(ParserOutput(TreeCRF(s_new, first.lengths)), first)
    e_new, _ = brute_expectations(s_new, constraints, SENTENCES[:2])
    torch.testing.assert_close(again.expected, e_new + e2)
    with pytest.raises(ValueError, match="batch.index"):
        objective.aggregate_of(ParserOutput(TreeCRF(s_new, first.lengths)), make_batch(LENGTHS[:2]))


def test_corpus_cache_state_round_trip_continues_identically():
    constraints = constraint_set()
    first = make_batch(LENGTHS[:2], upos=upos_ids(SENTENCES[:2]), index=[0, 1])
    second = make_batch(LENGTHS[2:], upos=upos_ids(SENTENCES[2:]), index=[2])
    s_first, s_second = random_scores(LENGTHS[:2], seed=36), random_scores(LENGTHS[2:], seed=37)
    original = GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache")
    original.aggregate_of(ParserOutput(TreeCRF(s_first, first.lengths)), first)
    state = original.state_dict()
    saved = state["cache"]["expected"].clone()
    restored = GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache")
    restored.load_state_dict(state)
    want = original(ParserOutput(TreeCRF(s_second, second.lengths)), second).loss
    got = restored(ParserOutput(TreeCRF(s_second, second.lengths)), second).loss
    assert float(got.detach()) == float(want.detach())
    e1, _ = brute_expectations(s_first, constraints, SENTENCES[:2])
    torch.testing.assert_close(restored.cache.expected[:2].sum(0), e1)
    assert torch.equal(state["cache"]["expected"], saved)  # the given state is not mutated
    with pytest.raises(ValueError, match="no 'cache' entry"):
        restored.load_state_dict({})
    with pytest.raises(ValueError, match=r"must be \[S, K\]"):
        restored.load_state_dict({"cache": {"expected": saved, "counts": saved[:1], "seen": saved[:, 0] > 0}})


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_ge_targets_met_on_a_toy_problem(criterion):
    spec = [
        {"child": "DET", "parent": "NOUN", "target": 1.0},
        {"child": "NOUN", "parent": "VERB", "target": 0.75},
        {"child": "VERB", "parent": "ROOT", "target": 1.0},
    ]
    constraints = ConstraintSet(parse_spec(spec, source="toy"), NAMES)
    sentences = [["DET", "NOUN", "VERB", "NOUN"], ["NOUN", "VERB", "DET", "NOUN"]]
    batch = make_batch([4, 4], upos=upos_ids(sentences))
    scores = torch.zeros(2, 5, 5, dtype=torch.float64, requires_grad=True)
    optimiser = torch.optim.Adam([scores], lr=0.3)
    objective = GeneralizedExpectation(constraints, criterion=criterion)
    for _ in range(40):
        optimiser.zero_grad()
        out = objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
        out.loss.backward()
        optimiser.step()
    aggregate = objective.aggregate_of(ParserOutput(TreeCRF(scores.detach(), batch.lengths)), batch)
    model, _ = objective.proportions(aggregate)
    assert (model - constraints.targets).abs().max() < 0.05, model


def test_ge_options_are_validated():
    with pytest.raises(ValueError, match="criterion"):
        GeneralizedExpectation(constraint_set(), criterion="l1")
    with pytest.raises(ValueError, match="aggregate"):
        GeneralizedExpectation(constraint_set(), aggregate="epoch")
