"""Built-in constraint sets: ud_universal loads, and oracle targets from labeled sentences."""

from __future__ import annotations

import pytest
import torch

from parser.constraints import (
    UPOS_TAGS,
    ConstraintSpecError,
    builtin_sets,
    load_constraints,
    oracle_constraints,
    round_target,
)

NAMES = ["<pad>", "<unk>", "<root>", *UPOS_TAGS]


def test_ud_universal_loads_with_at_most_25_constraints():
    constraint_set = load_constraints("ud_universal", NAMES)
    assert "ud_universal" in builtin_sets() and "oracle" in builtin_sets()
    assert 10 <= len(constraint_set) <= 25
    assert all(0.0 <= t <= 1.0 for t in constraint_set.targets.tolist())
    # The headline guideline constraints are there.
    described = {c.describe() for c in constraint_set.constraints}
    assert {"DET->NOUN|PROPN", "AUX->VERB", "CCONJ->*:right"} <= described


def test_ud_universal_features_on_a_sentence():
    constraint_set = load_constraints("ud_universal", NAMES)
    tags = ["DET", "NOUN", "VERB", "PUNCT"]
    upos = torch.tensor([[2] + [NAMES.index(t) for t in tags]])
    features = constraint_set.features(upos, torch.tensor([4]))
    det_noun = constraint_set.names.index("DET->NOUN|PROPN")
    rows = features.arc_index[features.feature_ids == det_noun].tolist()
    assert rows == [[0, 1, 2]]  # the DET's only NOUN head candidate
    leaves = constraint_set.names.index("function-words-are-leaves")
    assert features.counts[0, leaves] == 4  # every word is a child of that constraint
    heads_of_leaves = {head for _, _, head in features.arc_index[features.feature_ids == leaves].tolist()}
    assert heads_of_leaves == {1, 4}  # DET and PUNCT positions


@pytest.mark.parametrize(
    "proportion, rounded", [(0.0, 0.0), (0.04, 0.0), (0.06, 0.1), (0.2, 0.25), (0.62, 0.5), (0.63, 0.75), (0.9, 1.0)]
)
def test_round_target(proportion, rounded):
    assert round_target(proportion) == rounded


def test_oracle_targets_from_labeled_sentences():
    # DET -> NOUN (head right of the DET) for 3 of 4 DETs; NOUN -> VERB with the head to the
    # right twice, to the left once; 3 VERB roots. Ties rank by (parent, child, direction).
    upos = [
        ["DET", "NOUN", "VERB"],
        ["VERB", "DET", "NOUN"],
        ["DET", "NOUN", "VERB", "DET"],
    ]
    heads = [[2, 3, 0], [0, 3, 1], [2, 3, 0, 3]]
    constraints = oracle_constraints(heads, upos, top_k=3)
    assert [c.describe() for c in constraints] == ["DET->NOUN:right", "VERB->ROOT", "NOUN->VERB:right"]
    assert [c.target for c in constraints] == [0.75, 1.0, 0.75]  # 3/4, 3/3, 2/3 rounded
    # ids into the vocabulary work too, and -1 (unannotated) heads are skipped.
    ids = [[NAMES.index(t) for t in sentence] for sentence in upos]
    heads[2][3] = -1
    by_id = load_constraints("oracle", NAMES, heads=heads, upos=ids, top_k=2)
    assert by_id.names == ["DET->NOUN:right", "VERB->ROOT"]
    assert by_id.targets.tolist() == [1.0, 1.0]


def test_oracle_input_errors():
    with pytest.raises(ValueError, match="pass heads= and upos="):
        load_constraints("oracle", NAMES)
    with pytest.raises(ValueError, match="sentence 0 has 2 heads but 1 UPOS"):
        oracle_constraints([[0, 1]], [["VERB"]])
    with pytest.raises(ValueError, match="word 1: head 5 out of range"):
        oracle_constraints([[5]], [["VERB"]])
    with pytest.raises(ConstraintSpecError, match="no annotated words"):
        oracle_constraints([[-1]], [["VERB"]])


def test_sets_joined_with_plus_keep_both_lists_in_order():
    universal = load_constraints("ud_universal", NAMES).constraints
    locality = load_constraints("locality", NAMES).constraints
    joined = load_constraints("ud_universal+locality", NAMES)
    assert joined.constraints == universal + locality
    assert joined.source == "ud_universal+locality"
    assert [c.distance for c in locality] == [(1, 1), (1, 3), (1, 3)]
    with pytest.raises(ValueError, match="nonexistent"):
        load_constraints("ud_universal+nonexistent", NAMES)
    with pytest.raises(ValueError, match="not oracle"):
        load_constraints("ud_universal+oracle", NAMES)


def test_ud_coordination_is_ud_universal_plus_at_most_4_coordination_constraints():
    universal = load_constraints("ud_universal", NAMES).constraints
    coordination = load_constraints("ud_coordination", NAMES)
    assert "ud_coordination" in builtin_sets()
    assert len(coordination) <= 25
    assert coordination.constraints[: len(universal)] == universal
    extra = coordination.constraints[len(universal) :]
    assert 1 <= len(extra) <= 4
    assert all(c.after == ("CCONJ",) and c.direction == "left" for c in extra)
    # "cats and dogs": only dogs (after the CCONJ) is constrained; its one head candidate before
    # the conjunction is cats (distance 2), not the CCONJ.
    tags = ["NOUN", "CCONJ", "NOUN"]
    upos = torch.tensor([[2] + [NAMES.index(t) for t in tags]])
    features = coordination.features(upos, torch.tensor([3]))
    nominal = coordination.names.index("nominal-conjunct-after-cconj-head-left")
    verbal = coordination.names.index("verb-conjunct-after-cconj-head-left")
    assert features.arc_index[features.feature_ids == nominal].tolist() == [[0, 3, 1]]
    assert features.counts[0].tolist()[nominal] == 1 and features.counts[0].tolist()[verbal] == 0
