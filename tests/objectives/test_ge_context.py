"""GE with context constraints (``after``): the features and the loss against the brute-force
reading of tests/objectives/ge_brute.py, on sentences with words before and after a CCONJ."""

from __future__ import annotations

import pytest
import torch

from parser.constraints import ConstraintSet, parse_spec
from parser.objectives import GeneralizedExpectation, ParserOutput
from tests.objectives.ge_brute import brute_expectations, divergences, fires
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

NAMES = ["<pad>", "<unk>", "<root>", "NOUN", "CCONJ", "VERB", "DET"]
SPEC = [
    {"child": ["NOUN", "VERB"], "after": "CCONJ", "direction": "left", "distance": [2, None], "target": 0.75},
    {"child": "NOUN", "after": ["CCONJ", "DET"], "parent": "VERB", "target": 0.5},
    {"child": "VERB", "after": "CCONJ", "parent": "ROOT", "target": 0.1},
    {"child": "NOUN", "target": 0.25, "parent": "NOUN"},  # no context
]
SENTENCES = [["NOUN", "CCONJ", "NOUN", "VERB"], ["VERB", "CCONJ", "VERB"], ["CCONJ", "DET", "NOUN"]]
LENGTHS = [4, 3, 3]


def setup():
    constraints = ConstraintSet(parse_spec(SPEC, source="test"), NAMES)
    upos = [[NAMES.index(tag) for tag in sentence] for sentence in SENTENCES]
    return constraints, make_batch(LENGTHS, upos=upos)


def test_context_features_match_the_brute_force_reading():
    constraints, batch = setup()
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
    assert {(b, d, h) for b, d, h, j in expected if j == 0} == {(0, 3, 1), (1, 3, 1)}
    # Child counts: the context restricts the normaliser too.
    assert features.counts.tolist() == [[1, 1, 0, 2], [1, 0, 1, 0], [0, 1, 0, 1]]


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_ge_loss_with_context_matches_enumeration(criterion):
    constraints, batch = setup()
    scores = random_scores(LENGTHS, seed=7)
    out = GeneralizedExpectation(constraints, criterion=criterion)(
        ParserOutput(TreeCRF(scores, batch.lengths)), batch
    )
    expected, counts = brute_expectations(scores, constraints, SENTENCES)
    model, target = expected / counts, constraints.targets
    torch.testing.assert_close(out.loss, divergences(model, target, criterion).sum())
    assert out.logs["active"] == 4
