"""UD rules at prediction time: the label masks, the conditioned tree distribution, and the exact
joint choice of each head's relations (against enumeration)."""

from __future__ import annotations

import itertools

import pytest
import torch

from parser.data.vocab import Vocab
from parser.models import ud_rules
from parser.models.edge_scores import EdgeScores, to_output
from parser.models.ud_rules import RULES, UDRules, choose_relations, constrain, parse_rules
from tests.structs.brute import all_trees

RELS = Vocab(["root", "nsubj", "obj", "conj", "nsubj:outer", "csubj:pass", "det", "flat:name"], name="rels")
ID = {name: RELS.index(name) for name in RELS.tokens}


def rules(*names: str) -> UDRules:
    return UDRules.from_vocab(RELS, names or RULES)


def test_rules_read_the_relation_names():
    every = rules()
    assert every.root == ID["root"]
    assert set(every.left_to_right) == {ID["conj"], ID["flat:name"]}
    assert set(every.subjects) == {ID["nsubj"], ID["csubj:pass"]}  # :outer is not limited
    assert every.objects == (ID["obj"],)
    assert UDRules.from_vocab(Vocab(["a", "b"], name="rels")) is None  # not a UD relation set
    assert UDRules.from_vocab(RELS, ()) is None
    assert parse_rules("none") == () and parse_rules(["root"]) == ("root",)
    with pytest.raises(ValueError, match="ud_rules.*'roots'"):
        parse_rules("roots")


def test_allowed_mask():
    allowed = rules("root", "left_to_right").allowed(4, len(RELS))
    root, conj, det = ID["root"], ID["conj"], ID["det"]
    assert not allowed[..., :3].any()  # specials never
    assert allowed[2, 0, root] and not allowed[2, 0, det]  # from ROOT: root only
    assert not allowed[2, 1, root] and allowed[2, 1, det]  # root only from ROOT
    assert allowed[3, 1, conj] and not allowed[1, 3, conj]  # conj left to right only
    assert allowed[1, 3, det]


def enumerate_labeled(arcs, label_logp, n, allowed):
    """log-weights of every (tree, labels) with allowed labels, by enumeration."""
    weights = {}
    for heads in all_trees(n, single_root=True):
        choices = [[l for l in range(len(RELS)) if allowed[d, heads[d - 1], l]] for d in range(1, n + 1)]
        for labels in itertools.product(*choices):
            w = sum(float(arcs[d, heads[d - 1]] + label_logp[d, heads[d - 1], labels[d - 1]])
                    for d in range(1, n + 1))
            weights[(tuple(heads), labels)] = w
    return weights


@pytest.mark.parametrize("seed", range(4))
def test_constrained_classifier_is_the_joint_model_conditioned_on_valid_labels(seed):
    torch.manual_seed(seed)
    n, size = 4, 5
    arcs = torch.randn(1, size, size, dtype=torch.float64)
    labels = torch.randn(1, size, size, len(RELS), dtype=torch.float64)
    every = rules()
    edge = constrain(EdgeScores(arcs=arcs, labels=labels), every, labels="classifier")
    out = to_output(edge, torch.tensor([n]), labels="classifier")
    label_logp = labels[0, ..., 3:].log_softmax(-1)
    label_logp = torch.cat([torch.full((size, size, 3), float("-inf"), dtype=torch.float64), label_logp], -1)
    weights = enumerate_labeled(arcs[0], label_logp, n, every.allowed(size, len(RELS)))
    log_z = torch.logsumexp(torch.tensor(list(weights.values()), dtype=torch.float64), 0)
    marginals = torch.zeros(size, size, dtype=torch.float64)
    for (heads, _), w in weights.items():
        for d in range(1, n + 1):
            marginals[d, heads[d - 1]] += torch.exp(torch.tensor(w, dtype=torch.float64) - log_z)
    assert torch.allclose(out.dist.arc_marginals[0], marginals, atol=1e-9)
    assert torch.allclose(out.dist.log_partition[0], log_z, atol=1e-9)


def test_joint_labels_are_masked_in_the_labeled_crf():
    torch.manual_seed(0)
    size = 5
    edge = EdgeScores(arcs=torch.randn(1, size, size), labels=torch.randn(1, size, size, len(RELS)))
    out = to_output(constrain(edge, rules(), labels="joint"), torch.tensor([4]), labels="joint")
    marginals = out.dist.marginals[0]
    assert marginals[1:, 1:, ID["root"]].abs().max() == 0  # root only from ROOT
    assert marginals[1:, 0, ID["det"]].abs().max() == 0
    leftward = torch.arange(size)[None, :] > torch.arange(size)[:, None]
    assert marginals[..., ID["conj"]][leftward].abs().max() == 0


def brute_force_relations(scores, heads, n, every):
    """The best relation assignment under the per-head limits, by enumeration."""
    best, best_value = None, float("-inf")
    for labels in itertools.product(range(3, len(RELS)), repeat=n):
        counts = {}
        ok = True
        for d, label in enumerate(labels, start=1):
            for kind, ids in (("s", every.subjects), ("o", every.objects)):
                if label in ids:
                    key = (heads[d], kind)
                    counts[key] = counts.get(key, 0) + 1
                    ok &= counts[key] <= 1
        if not ok:
            continue
        value = sum(float(scores[d, labels[d - 1]]) for d in range(1, n + 1))
        if value > best_value + 1e-12:
            best, best_value = labels, value
    return best, best_value


@pytest.mark.parametrize("seed", range(12))
def test_choose_relations_is_exact(seed):
    generator = torch.Generator().manual_seed(seed)
    n = 5
    every = rules("one_subject", "one_object")
    # Subjects and objects favoured, so that the limits bind.
    scores = torch.randn(1, n + 1, len(RELS), generator=generator, dtype=torch.float64)
    scores[..., list(every.subjects) + list(every.objects)] += 1.5
    scores[..., :3] = float("-inf")
    heads = torch.tensor([[0] + [int(h) for h in torch.randint(0, 3, (n,), generator=generator)]])
    heads[0, 1] = 0  # (any head list: the limits are per head, trees or not)
    words = torch.arange(n + 1)[None] >= 1
    chosen = choose_relations(scores, heads, words, every)[0]
    _, best_value = brute_force_relations(scores[0], heads[0].tolist(), n, every)
    value = sum(float(scores[0, d, chosen[d]]) for d in range(1, n + 1))
    assert value == pytest.approx(best_value, abs=1e-9)
    for h in range(n + 1):
        dependents = [d for d in range(1, n + 1) if heads[0, d] == h]
        assert sum(int(chosen[d]) in every.subjects for d in dependents) <= 1
        assert sum(int(chosen[d]) in every.objects for d in dependents) <= 1


def test_choose_relations_without_limits_is_the_argmax():
    scores = torch.randn(2, 6, len(RELS))
    heads = torch.zeros(2, 6, dtype=torch.long)
    words = torch.ones(2, 6, dtype=torch.bool)
    assert torch.equal(choose_relations(scores, heads, words, rules("root")), scores.argmax(-1))


@pytest.mark.parametrize("labels", ["classifier", "joint"])
def test_constrain_without_autograd_gives_the_same_bits(labels, monkeypatch):
    # Prediction masks and reduces the label grid block by block: the same values, bit for bit.
    torch.manual_seed(0)
    size = 9
    arcs = torch.randn(7, size, size)
    # stored [B, dep, L, head], as the bilinear label scorer returns it
    rel_scores = torch.randn(7, size, len(RELS), size).transpose(2, 3)
    want = constrain(EdgeScores(arcs=arcs, labels=rel_scores), rules(), labels=labels)
    monkeypatch.setattr(ud_rules, "GRID_BLOCK", 2 * size * size * len(RELS))  # 2 sentences a block
    with torch.no_grad():
        got = constrain(EdgeScores(arcs=arcs, labels=rel_scores), rules(), labels=labels)
    assert torch.equal(got.arcs, want.arcs)
    assert torch.equal(got.labels, want.labels)
    assert torch.isinf(got.labels[..., :3]).all() and torch.isfinite(got.arcs).all()
