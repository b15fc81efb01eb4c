"""WeightedSum: named logs, warm-up, streams; build_objective from config mappings."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from parser.constraints import load_constraints
from parser.objectives import (
    Entropy,
    GeneralizedExpectation,
    KLToTeacher,
    Likelihood,
    Output,
    ParserOutput,
    Risk,
    Term,
    WeightedSum,
    build_objective,
)
from tests.objectives.helpers import TreeCRF, make_batch, random_scores

LENGTHS = [3, 2]
HEADS = [[2, 0, 2], [0, 1]]
RELS = [[0, 1, 1], [1, 0]]


def output(seed=0):
    scores = random_scores(LENGTHS, seed=seed)
    return ParserOutput(TreeCRF(scores, torch.tensor(LENGTHS))), scores


def test_logs_are_named_per_term_and_total_is_the_weighted_sum():
    objective = WeightedSum(
        (
            Term("likelihood", Likelihood(), weight=1.0, stream="labeled"),
            Term("risk", Risk(), weight=0.5, stream="labeled"),
            Term("entropy", Entropy(), weight=0.1, warmup=10, stream="any"),
        )
    )
    out, _ = output()
    batch = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    result = objective(out, batch, step=5)
    parts = {name: term.objective(out, batch).loss for name, term in zip(objective.names, objective.terms)}
    expected = parts["likelihood"] + 0.5 * parts["risk"] + 0.1 * 0.5 * parts["entropy"]
    torch.testing.assert_close(result.loss, expected)
    assert set(result.logs) == {
        "likelihood/loss", "likelihood/tree_nll", "likelihood/weight",
        "risk/loss", "risk/expected_errors", "risk/weight",
        "entropy/loss", "entropy/value", "entropy/weight", "total",
    }  # fmt: skip
    assert float(result.logs["entropy/weight"]) == pytest.approx(0.05)
    assert all(not value.requires_grad for value in result.logs.values())


def test_warmup_is_linear_then_flat():
    term = Term("entropy", Entropy(), weight=0.2, warmup=100)
    assert [term.weight_at(s) for s in (0, 25, 100, 1000)] == pytest.approx([0.0, 0.05, 0.2, 0.2])
    assert Term("x", Entropy(), weight=0.3).weight_at(0) == 0.3


def test_terms_of_another_stream_are_skipped():
    objective = WeightedSum(
        (Term("likelihood", Likelihood(), stream="labeled"), Term("entropy", Entropy(), weight=0.1, stream="unlabeled"))
    )
    out, _ = output()
    unlabeled = make_batch(LENGTHS)
    result = objective(out, unlabeled)
    assert set(result.logs) == {"entropy/loss", "entropy/value", "entropy/weight", "total"}
    torch.testing.assert_close(result.loss, 0.1 * Entropy()(out, unlabeled).loss)
    labeled = make_batch(LENGTHS, heads=HEADS, rels=RELS)
    assert "entropy/loss" not in objective(out, labeled).logs


def test_no_applicable_term_gives_a_zero_that_can_be_backpropagated():
    objective = WeightedSum((Term("likelihood", Likelihood(), stream="labeled"),))
    out, scores = output()
    result = objective(out, make_batch(LENGTHS))
    assert float(result.loss.detach()) == 0.0 and set(result.logs) == {"total"}
    result.loss.backward()
    assert scores.grad.abs().sum() == 0


def test_term_validation():
    with pytest.raises(ValueError, match="stream"):
        Term("a", Entropy(), stream="gold")
    with pytest.raises(ValueError, match="warmup"):
        Term("a", Entropy(), warmup=-1)
    with pytest.raises(ValueError, match="duplicate term names"):
        WeightedSum((Term("a", Entropy()), Term("a", Likelihood())))


NAMES = ["<pad>", "<unk>", "<root>", "DET", "NOUN", "VERB"]


def test_build_objective_from_a_mapping():
    constraints = load_constraints("ud_universal", NAMES)
    teacher_out, _ = output(seed=9)
    spec = {
        "likelihood": {"weight": 1.0},
        "entropy": {"weight": 0.1, "warmup": 1000, "alpha": 2.0},
        "ge": {"weight": 0.5, "criterion": "kl", "aggregate": "corpus", "constraints": "ud_universal"},
        "risk_las": {"type": "risk", "labeled": True, "weight": 0.3},
        "kl": {"weight": 0.0},  # ablated: left out, so no teacher is needed
        "local": None,
    }
    objective = build_objective(spec, constraints=constraints, teacher=lambda batch: teacher_out)
    assert objective.names == ["likelihood", "entropy", "ge", "risk_las"]
    likelihood, entropy, ge, risk = objective.terms
    assert likelihood.stream == "labeled" and entropy.stream == "unlabeled" and ge.stream == "unlabeled"
    assert entropy.objective == Entropy(alpha=2.0) and entropy.warmup == 1000 and entropy.weight == 0.1
    assert isinstance(ge.objective, GeneralizedExpectation) and ge.objective.criterion == "kl"
    assert ge.objective.aggregate == "corpus" and ge.objective.constraints is constraints
    assert risk.objective == Risk(labeled=True) and risk.stream == "labeled"
    kl = build_objective({"kl": {"direction": "reverse", "stream": "any"}}, teacher=lambda batch: teacher_out)
    assert isinstance(kl.terms[0].objective, KLToTeacher) and kl.terms[0].stream == "any"


def test_build_objective_from_a_dataclass():
    @dataclass
    class TermConfig:
        weight: float | None = 1.0
        warmup: int = 0
        stream: str | None = None
        alpha: float | None = None

    @dataclass
    class ObjectiveConfig:
        likelihood: TermConfig = field(default_factory=TermConfig)
        entropy: TermConfig = field(default_factory=lambda: TermConfig(weight=0.2, alpha=0.5))

    objective = build_objective(ObjectiveConfig())
    assert objective.names == ["likelihood", "entropy"]
    assert objective.terms[1].objective == Entropy(alpha=0.5) and objective.terms[1].stream == "unlabeled"
    out, _ = output()
    result = objective(out, make_batch(LENGTHS, heads=HEADS, rels=RELS), step=3)
    assert isinstance(result, Output) and "likelihood/loss" in result.logs


def test_build_objective_errors():
    with pytest.raises(ValueError, match="unknown objective 'entropi'; known: likelihood, local, risk, confident_arcs, entropy, ge, kl"):
        build_objective({"entropi": {"weight": 1.0}})
    with pytest.raises(ValueError, match=r"unknown options \['alpah'\]"):
        build_objective({"entropy": {"alpah": 2.0}})
    with pytest.raises(ValueError, match="needs constraints="):
        build_objective({"ge": {"weight": 1.0}})
    with pytest.raises(ValueError, match="needs teacher="):
        build_objective({"kl": {"weight": 1.0}})
    with pytest.raises(ValueError, match="no term with a non-zero weight"):
        build_objective({"likelihood": {"weight": 0}})


def test_build_objective_from_an_omegaconf_node():
    from omegaconf import OmegaConf

    node = OmegaConf.create({"likelihood": {"weight": 1.0}, "entropy": {"weight": 0.1, "warmup": 50, "stream": None}})
    objective = build_objective(node)
    assert objective.names == ["likelihood", "entropy"] and objective.terms[1].stream == "unlabeled"


def test_state_dict_holds_the_stateful_terms_only():
    constraints = load_constraints("ud_universal", ["<pad>", "<unk>", "<root>", "NOUN", "VERB"])
    objective = WeightedSum((
        Term("likelihood", Likelihood(), stream="labeled"),
        Term("ge", GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache")),
    ))
    state = objective.state_dict()
    assert set(state) == {"ge"} and state["ge"]["cache"]["expected"] is None
    assert objective.load_state_dict(state) == ([], [])
    with pytest.raises(ValueError, match=r"no state for terms \['ge'\], state for unknown terms \['other'\]"):
        objective.load_state_dict({"other": {}})
    assert objective.load_state_dict({"other": {}}, strict=False) == (["ge"], ["other"])
