"""The ud_harmony set: ud_coordination's 23 constraints plus one pooled consistency constraint,
and that constraint's feature columns on a sentence."""

from __future__ import annotations

import torch

from parser.constraints import UPOS_TAGS, builtin_sets, load_constraints

NAMES = ["<pad>", "<unk>", "<root>", *UPOS_TAGS]


def test_ud_harmony_is_ud_coordination_plus_one_consistency_constraint():
    assert "ud_harmony" in builtin_sets()
    harmony = load_constraints("ud_harmony", NAMES)
    coordination = load_constraints("ud_coordination", NAMES)
    assert len(harmony) == len(coordination) + 1 <= 25
    assert harmony.constraints[: len(coordination)] == coordination.constraints
    (added,) = harmony.constraints[len(coordination) :]
    assert added.consistent and added.pooled and added.weight == 0.1 and added.target is None
    assert added.child == ("ADP", "AUX", "SCONJ", "DET")
    assert harmony.n_columns == len(harmony) + 2  # one pooled (left, right) pair
    # The ordinary constraints keep their targets and order.
    assert torch.equal(harmony.targets[: len(coordination)], coordination.targets)


def test_ud_harmony_consistency_columns_on_a_sentence():
    harmony = load_constraints("ud_harmony", NAMES)
    # "the cat sat on the mat": DET NOUN VERB ADP DET NOUN
    tags = ["DET", "NOUN", "VERB", "ADP", "DET", "NOUN"]
    upos = torch.tensor([[2] + [NAMES.index(t) for t in tags]])
    features = harmony.features(upos, torch.tensor([6]))
    (left, right), = harmony.consistency_columns.tolist()
    arcs = {k: set() for k in (left, right)}
    for (_, dep, head), k in zip(features.arc_index.tolist(), features.feature_ids.tolist()):
        if k in arcs:
            arcs[k].add((dep, head))
    content = {2, 3, 6}  # NOUN, VERB, NOUN
    function = {1, 4, 5}  # DET, ADP, DET
    assert arcs[left] == {(d, h) for d in function for h in content if h < d}
    assert arcs[right] == {(d, h) for d in function for h in content if h > d}
    assert features.counts[0, left] == features.counts[0, right] == 3


def test_ud_clauses_is_ud_harmony_plus_one_clause_consistency_constraint():
    clauses = load_constraints("ud_clauses", NAMES)
    harmony = load_constraints("ud_harmony", NAMES)
    assert len(clauses) == len(harmony) + 1 == 25
    assert clauses.constraints[: len(harmony)] == harmony.constraints
    (added,) = clauses.constraints[len(harmony) :]
    assert added.consistent and not added.pooled and added.weight == 0.1
    assert added.child == ("VERB",) and added.parent == ("VERB", "ADJ")
    # one more (left, right) pair: VERB children of VERB or ADJ heads, on "VERB ADJ NOUN VERB"
    tags = ["VERB", "ADJ", "NOUN", "VERB"]
    upos = torch.tensor([[2] + [NAMES.index(t) for t in tags]])
    features = clauses.features(upos, torch.tensor([4]))
    left, right = clauses.consistency_columns.tolist()[-1]
    fired = {(k, d, h) for (_, d, h), k in zip(features.arc_index.tolist(), features.feature_ids.tolist())}
    verbs, governors = {1, 4}, {1, 2, 4}
    assert {(d, h) for k, d, h in fired if k == left} == {(d, h) for d in verbs for h in governors if h < d}
    assert {(d, h) for k, d, h in fired if k == right} == {(d, h) for d in verbs for h in governors if h > d}
    assert features.counts[0, left] == 2
