"""GE with direction-consistency constraints (``direction: consistent``): the spec, the feature
columns, and the penalty against an independent brute-force reading over every tree, its
gradient, and its value when all arcs go one way."""

from __future__ import annotations

import math

import pytest
import torch

from parser.constraints import ConstraintSet, ConstraintSpecError, parse_spec, read_spec
from parser.objectives import GeneralizedExpectation, ParserOutput
from parser.objectives.ge import GEAggregate
from tests.objectives.brute_ref import probabilities
from tests.objectives.ge_brute import brute_expectations
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

NAMES = ["<pad>", "<unk>", "<root>", "ADP", "NOUN", "VERB", "AUX", "CCONJ"]
SPEC = [
    {"child": "NOUN", "parent": "VERB", "target": 0.5},  # an ordinary constraint beside them
    {"child": ["ADP", "AUX"], "parent": ["NOUN", "VERB"], "direction": "consistent"},
    {"child": ["ADP", "AUX"], "parent": ["NOUN", "VERB"], "direction": "consistent", "pooled": True},
    {"child": "NOUN", "after": "ADP", "distance": [1, 2], "direction": "consistent", "name": "ctx"},
]
SENTENCES = [["ADP", "NOUN", "AUX", "VERB"], ["NOUN", "ADP", "NOUN", "VERB"], ["AUX", "VERB", "ADP"]]
LENGTHS = [4, 4, 3]


def setup():
    constraints = ConstraintSet(parse_spec(SPEC, source="test"), NAMES)
    upos = [[NAMES.index(tag) for tag in sentence] for sentence in SENTENCES]
    return constraints, make_batch(LENGTHS, upos=upos)


def side_counts(constraint, group, tags, tree):
    """Independent reading: (# left, # right) arcs of ``tree`` (heads of words 1..n) from a word
    of a tag in ``group`` (and the constraint's context) to a head satisfying parent and
    distance; and the number of such words."""
    left = right = words = 0
    for dep, head in enumerate(tree, start=1):
        if tags[dep - 1] not in group:
            continue
        if constraint.after is not None and not (dep > 1 and tags[dep - 2] in constraint.after):
            continue
        words += 1
        if head == 0 or (constraint.parent is not None and tags[head - 1] not in constraint.parent):
            continue
        if constraint.distance is not None:
            low, high = constraint.distance
            if abs(head - dep) < low or (high is not None and abs(head - dep) > high):
                continue
        left += head < dep
        right += head > dep
    return left, right, words


def brute_penalties(scores, constraints, sentences, criterion):
    """One penalty per group (per child tag, or per constraint when pooled), from E[left] and
    E[right] summed over the sentences by enumerating every tree."""
    penalties = []
    for c in constraints.constraints:
        if c.direction != "consistent":
            continue
        for group in [c.child] if c.pooled else [(t,) for t in c.child]:
            e_left = e_right = 0.0
            words = 0
            for b, tags in enumerate(sentences):
                n = len(tags)
                items, p = probabilities(scores[b, : n + 1, : n + 1], n, single_root=True)
                for (tree, _), prob in zip(items, p):
                    left, right, words_b = side_counts(c, group, tags, tree)
                    e_left, e_right = e_left + prob * left, e_right + prob * right
                words += words_b
            if words == 0:
                continue
            q = e_left / (e_left + e_right)  # = p_L / (p_L + p_R): the word count cancels
            if criterion == "squared":
                penalties.append(q * (1 - q))
            else:
                penalties.append(-(q * q.log() + (1 - q) * (1 - q).log()))
    return torch.stack(penalties)


def ordinary_loss(scores, constraints, criterion):
    expected, counts = brute_expectations(scores, constraints, SENTENCES)
    model, target = expected[0] / counts[0], constraints.targets[0]
    if criterion == "squared":
        return (target - model) ** 2
    return -target * model.log() - (1 - target) * (1 - model).log() + 2 * 0.5 * math.log(0.5)


# --- spec ------------------------------------------------------------------------------------


def test_consistent_constraints_parse_and_describe():
    constraints = parse_spec(SPEC, source="test")
    per_tag, pooled, context = constraints[1:]
    assert per_tag.consistent and per_tag.target is None and not per_tag.pooled
    assert per_tag.describe() == "ADP|AUX->NOUN|VERB:consistent"
    assert pooled.pooled and pooled.describe() == "ADP|AUX->NOUN|VERB:consistent:pooled"
    assert context.after == ("ADP",) and context.distance == (1, 2)
    assert not constraints[0].consistent and constraints[0].target == 0.5


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"target": 0.9}, "takes no 'target'"),
        ({"bound": "lower"}, "takes no 'bound'"),
        ({"rules": [["ADP", "NOUN"]]}, "takes no 'rules'"),
        ({"parent": "ROOT"}, "consistent with parent ROOT"),
        ({"pooled": "yes"}, "pooled must be true or false"),
        ({"weight": 0}, "weight must be a positive number"),
        ({"weight": True}, "weight must be a positive number"),
        ({"weight": "high"}, "weight must be a positive number"),
        ({"child": "ROOT"}, "unknown UPOS 'ROOT' in child"),
        ({"child": None}, "child must be a UPOS tag"),
    ],
)
def test_bad_consistent_constraints_name_the_file_and_constraint(tmp_path, extra, message):
    entry = {"child": ["ADP", "AUX"], "parent": "NOUN", "direction": "consistent", **extra}
    path = tmp_path / "harmony.yaml"
    path.write_text(
        "constraints:\n  - {child: DET, parent: NOUN, target: 0.9}\n  - " + repr(entry).replace("'", '"')
        .replace("None", "null").replace("True", "true") + "\n"
    )
    with pytest.raises(ConstraintSpecError, match=message) as error:
        read_spec(path)
    assert str(path) in str(error.value) and "constraint 1" in str(error.value)


def test_pooled_and_weight_need_direction_consistent():
    with pytest.raises(ConstraintSpecError, match=r"unknown keys \['pooled'\].*pooled: only with direction: consistent"):
        parse_spec([{"child": "ADP", "target": 0.5, "pooled": True}], source="x.yaml")
    with pytest.raises(ConstraintSpecError, match=r"unknown keys \['weight'\].*weight: only with direction: consistent"):
        parse_spec([{"child": "ADP", "target": 0.5, "weight": 2.0}], source="x.yaml")
    with pytest.raises(ConstraintSpecError, match="needs 'child'"):
        parse_spec([{"direction": "consistent"}], source="x.yaml")


# --- features --------------------------------------------------------------------------------


def test_feature_columns_of_consistency_groups():
    constraints, batch = setup()
    # 4 constraint columns, then (left, right) for ADP, AUX (per tag), ADP|AUX (pooled), NOUN (ctx).
    assert len(constraints) == 4 and constraints.n_columns == 4 + 2 * 4
    assert constraints.consistency_columns.tolist() == [[4, 5], [6, 7], [8, 9], [10, 11]]
    assert constraints.consistency_owners.tolist() == [1, 1, 2, 3]
    assert constraints.proportions_mask.tolist() == [True] + [False] * 11
    assert math.isnan(constraints.targets[1]) and constraints.column_targets[1] == 0
    features = constraints.features(batch.upos, batch.lengths)
    found = {}
    for (b, dep, head), k in zip(features.arc_index.tolist(), features.feature_ids.tolist()):
        found.setdefault(k, set()).add((b, dep, head))
    assert not {1, 2, 3} & set(found)  # a consistent constraint's own column never fires
    # ADP left / right: sentence 0 "ADP NOUN AUX VERB": heads NOUN(2), VERB(4) on the right only;
    # sentence 1 "NOUN ADP NOUN VERB": NOUN(1) left, NOUN(3) and VERB(4) right; sentence 2 the
    # final ADP: VERB(2) left.
    assert found[4] == {(1, 2, 1), (2, 3, 2)}
    assert found[5] == {(0, 1, 2), (0, 1, 4), (1, 2, 3), (1, 2, 4)}
    assert found[6] == {(0, 3, 2)} and found[7] == {(0, 3, 4), (2, 1, 2)}  # AUX
    assert found[8] == found[4] | found[6] and found[9] == found[5] | found[7]  # pooled
    # NOUN after an ADP (sentence 0 word 2, sentence 1 word 3), parent any word, distance 1-2.
    assert found[10] == {(0, 2, 1), (1, 3, 2), (1, 3, 1)}
    assert found[11] == {(0, 2, 3), (0, 2, 4), (1, 3, 4)}
    counts = features.counts
    assert counts[:, 1:4].sum() == 0
    assert counts[:, 4].tolist() == counts[:, 5].tolist() == [1, 1, 1]  # ADP words
    assert counts[:, 8].tolist() == [2, 1, 2]  # ADP + AUX words
    assert counts[:, 10].tolist() == [1, 1, 0]


# --- loss ------------------------------------------------------------------------------------


@pytest.mark.parametrize("criterion", ["squared", "kl"])
@pytest.mark.parametrize("aggregate", ["batch", "corpus"])
def test_consistency_loss_matches_enumeration(criterion, aggregate):
    constraints, batch = setup()
    batch = make_batch(LENGTHS, upos=batch.upos[:, 1:].tolist(), index=[0, 1, 2])
    scores = random_scores(LENGTHS, seed=11)
    out = GeneralizedExpectation(constraints, criterion=criterion, aggregate=aggregate)(
        ParserOutput(TreeCRF(scores, batch.lengths)), batch
    )
    penalties = brute_penalties(scores, constraints, SENTENCES, criterion)
    assert penalties.shape == (4,) and bool((penalties > 0).all())
    torch.testing.assert_close(out.logs["consistency"], penalties.sum().detach())
    torch.testing.assert_close(out.loss, ordinary_loss(scores, constraints, criterion) + penalties.sum())
    assert out.logs["active"] == 1 + 4


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_consistency_gradient(criterion):
    constraints, batch = setup()
    objective = GeneralizedExpectation(constraints, criterion=criterion)
    scores = random_scores(LENGTHS, seed=12)
    loss = objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch).loss
    (grad,) = torch.autograd.grad(loss, scores)
    # The same gradient through the brute-force reading (autograd over enumerated trees).
    reference = ordinary_loss(scores, constraints, criterion) + brute_penalties(
        scores, constraints, SENTENCES, criterion
    ).sum()
    (expected,) = torch.autograd.grad(reference, scores)
    torch.testing.assert_close(grad, expected)
    assert grad.abs().max() > 1e-3
    torch.autograd.gradcheck(lambda s: objective(ParserOutput(TreeCRF(s, batch.lengths)), batch).loss, (scores,))


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_penalty_is_symmetric_maximal_at_a_tie_and_zero_one_way(criterion):
    spec = [{"child": "ADP", "parent": "NOUN", "direction": "consistent"}]
    constraints = ConstraintSet(parse_spec(spec, source="test"), NAMES)
    objective = GeneralizedExpectation(constraints, criterion=criterion)

    def loss(left, right, count=3.0):
        expected = torch.tensor([0.0, left, right], dtype=torch.float64, requires_grad=True)
        counts = torch.tensor([0.0, count, count], dtype=torch.float64)
        out = objective.loss_of(GEAggregate(expected, counts))
        (grad,) = torch.autograd.grad(out.loss, expected)
        return out.loss.item(), grad

    top = 0.25 if criterion == "squared" else math.log(2)
    assert loss(1.5, 1.5)[0] == pytest.approx(top)
    q = 0.2  # q = 0.6 / 3.0, and its mirror image
    expected = q * (1 - q) if criterion == "squared" else -(q * math.log(q) + (1 - q) * math.log(1 - q))
    assert loss(0.6, 2.4)[0] == pytest.approx(expected) and loss(2.4, 0.6)[0] == pytest.approx(expected)
    for left, right in [(0.0, 2.0), (2.0, 0.0)]:  # all arcs one way: exactly 0, finite slope
        value, grad = loss(left, right)
        assert value == 0.0 and bool(torch.isfinite(grad).all())
    assert loss(0.0, 0.0)[0] == 0.0  # no arc can fire: inactive
    assert loss(1.0, 2.0, count=0.0)[0] == 0.0  # no child word: inactive


def test_penalty_zero_when_the_sentence_forces_one_side():
    # "ADP NOUN": the ADP's only NOUN head is on its right, so E[left] is exactly 0.
    spec = [{"child": "ADP", "parent": "NOUN", "direction": "consistent"}]
    constraints = ConstraintSet(parse_spec(spec, source="test"), NAMES)
    batch = make_batch([2], upos=[[NAMES.index("ADP"), NAMES.index("NOUN")]])
    scores = random_scores([2], seed=3)
    for criterion in ("squared", "kl"):
        out = GeneralizedExpectation(constraints, criterion=criterion)(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
        assert out.loss.item() == 0.0 and out.logs["active"] == 1
        (grad,) = torch.autograd.grad(out.loss, scores)
        assert bool(torch.isfinite(grad).all()) and grad.abs().max() == 0


def test_penalty_near_zero_when_the_model_puts_every_arc_one_way():
    # Prepositions: strong scores for each ADP -> the next word; the penalty vanishes, and it is
    # large when the same sentences are scored with no preference.
    upos = [[NAMES.index(tag) for tag in tags] for tags in SENTENCES[:2]]
    batch = make_batch(LENGTHS[:2], upos=upos)  # sentence 2's final ADP has no right neighbour
    scores = torch.zeros(2, 5, 5, dtype=torch.float64)
    for b, tags in enumerate(SENTENCES[:2]):
        for dep, tag in enumerate(tags, start=1):
            if tag in ("ADP", "AUX"):
                scores[b, dep, dep + 1] = 40.0
    only = ConstraintSet(parse_spec(SPEC[1:3], source="test"), NAMES)
    for criterion in ("squared", "kl"):
        objective = GeneralizedExpectation(only, criterion=criterion)
        sharp = objective(ParserOutput(TreeCRF(scores, batch.lengths)), batch).loss.item()
        flat = objective(ParserOutput(TreeCRF(torch.zeros_like(scores), batch.lengths)), batch).loss.item()
        assert sharp < 1e-9 and flat > 0.1


@pytest.mark.parametrize("criterion", ["squared", "kl"])
def test_weight_multiplies_only_its_constraints_penalties(criterion):
    constraints, batch = setup()
    spec = [dict(entry) for entry in SPEC]
    spec[2]["weight"] = 0.25  # the pooled constraint
    weighted = ConstraintSet(parse_spec(spec, source="test"), NAMES)
    assert weighted.consistency_weights.tolist() == [1.0, 1.0, 0.25, 1.0]
    scores = random_scores(LENGTHS, seed=13)
    penalties = brute_penalties(scores, constraints, SENTENCES, criterion)
    out = GeneralizedExpectation(weighted, criterion=criterion)(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
    factors = torch.tensor([1.0, 1.0, 0.25, 1.0], dtype=torch.float64)
    torch.testing.assert_close(out.logs["consistency"], (factors * penalties).sum().detach())
    torch.testing.assert_close(out.loss, ordinary_loss(scores, constraints, criterion) + (factors * penalties).sum())
