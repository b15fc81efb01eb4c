"""Annealing of any term's weight and temperature (parser/objectives/schedule.py, weighted.py):
schedule values at given steps, option parsing, and the tempered risk and entropy against
enumeration of every tree of small sentences (Smith & Eisner 2006's minimum risk annealing)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from parser.constraints import ConstraintSet, parse_spec
from parser.objectives import (
    Entropy,
    GeneralizedExpectation,
    ParserOutput,
    Risk,
    Term,
    WeightedSum,
    build_objective,
)
from parser.objectives.schedule import Schedule, tempered
from parser.structs import TreeCRF
from tests.objectives.brute_ref import probabilities
from tests.objectives.helpers import make_batch, random_scores


def test_schedule_values_at_given_steps():
    linear = Schedule(end=0.1, start=0.0, shape="linear", steps=100)
    assert [linear.at(s) for s in (-5, 0, 25, 50, 100, 400)] == pytest.approx([0, 0, 0.025, 0.05, 0.1, 0.1])
    cosine = Schedule(end=0.0, start=1.0, shape="cosine", steps=10)
    expected = [(1 + math.cos(math.pi * s / 10)) / 2 for s in (0, 2, 5, 8, 10)]
    assert [cosine.at(s) for s in (0, 2, 5, 8, 10)] == pytest.approx(expected)
    assert cosine.at(5) == pytest.approx(0.5) and cosine.at(11) == 0.0
    exponential = Schedule(end=0.01, start=1.0, shape="exponential", steps=4)
    assert [exponential.at(s) for s in (0, 1, 2, 4, 8)] == pytest.approx([1, 10**-0.5, 0.1, 0.01, 0.01])
    assert Schedule(end=0.3).at(0) == Schedule(end=0.3).at(10**6) == 0.3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shape": "step"}, "schedule must be one of"),
        ({"shape": "linear"}, "needs steps > 0"),
        ({"start": 0.5}, "needs a schedule"),
        ({"shape": "exponential", "start": 0.0, "steps": 3}, "positive start and end"),
        ({"steps": -1}, "steps must be an integer >= 0"),
    ],
)
def test_bad_schedules_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Schedule(end=1.0, **kwargs)


def test_term_weight_is_the_schedule_times_the_warmup():
    term = Term("e", Entropy(), weight=0.2, warmup=10, weight_schedule=Schedule(0.2, 0.4, "linear", 20))
    assert [term.weight_at(s) for s in (0, 5, 10, 20, 30)] == pytest.approx([0, 0.35 * 0.5, 0.3, 0.2, 0.2])
    assert Term("e", Entropy(), weight=0.2, warmup=100).weight_at(25) == pytest.approx(0.05)  # unchanged
    with pytest.raises(ValueError, match="ends at 0.4, not at weight=0.2"):
        Term("e", Entropy(), weight=0.2, weight_schedule=Schedule(0.4))


def test_build_parses_the_annealing_options_of_any_term():
    objective = build_objective({
        "likelihood": {"weight": 1.0},
        "entropy": {"weight": 0.1, "weight_start": 0.0, "weight_schedule": "cosine", "weight_steps": 100},
        "risk": {"temperature": 0.1, "temperature_start": 1.0, "temperature_schedule": "exponential",
                 "temperature_steps": 50},
        "decay": {"type": "entropy", "weight": 0.0, "weight_start": 0.5, "weight_schedule": "linear",
                  "weight_steps": 10},  # annealed to 0: kept
    })
    terms = {term.name: term for term in objective.terms}
    assert terms["likelihood"].weight_schedule is None and terms["likelihood"].temperature is None
    assert terms["entropy"].weight_at(50) == pytest.approx(0.05) and terms["entropy"].weight_at(100) == 0.1
    assert terms["risk"].temperature_at(0) == 1.0 and terms["risk"].temperature_at(25) == pytest.approx(0.1**0.5)
    assert terms["decay"].weight_at(5) == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"term 'risk': temperature options: temperatures must be > 0"):
        build_objective({"risk": {"temperature": 0.0}})
    with pytest.raises(ValueError, match=r"term 'entropy': weight options: schedule 'linear' needs steps > 0"):
        build_objective({"entropy": {"weight_start": 0.0, "weight_schedule": "linear"}})
    with pytest.raises(ValueError, match=r"term 'entropy': weight options: .* needs a schedule"):
        build_objective({"entropy": {"weight_start": 0.0}})


def _brute_risk(scores, lengths, heads, temperature):
    """Expected attachment errors per word under p^(1/T), by enumerating every tree."""
    total, words = 0.0, 0
    for b, n in enumerate(lengths):
        items, p = probabilities(scores[b, : n + 1, : n + 1] / temperature, n, single_root=True)
        errors = torch.tensor([sum(h != g for h, g in zip(tree, heads[b])) for tree, _ in items], dtype=p.dtype)
        total = total + (p * errors).sum()
        words += n
    return total / words


def _brute_entropy(scores, lengths, temperature):
    total = 0.0
    for b, n in enumerate(lengths):
        _, p = probabilities(scores[b, : n + 1, : n + 1] / temperature, n, single_root=True)
        total = total - (p * p.log()).sum()
    return total / sum(lengths)


HEADS = [[2, 0, 2], [2, 0, 4, 2]]
LENGTHS = [3, 4]


@pytest.mark.parametrize("temperature", [2.0, 1.0, 0.5, 0.1])
def test_tempered_risk_and_its_gradient_match_enumeration(temperature):
    batch = make_batch(LENGTHS, heads=HEADS)
    scores = random_scores(LENGTHS, seed=3, scale=2.0)
    term = Term("risk", Risk(), temperature=Schedule(end=temperature))
    out = WeightedSum((term,))(ParserOutput(TreeCRF(scores, batch.lengths)), batch, step=7)
    expected = _brute_risk(scores, LENGTHS, HEADS, temperature)
    assert out.logs["risk/loss"].item() == pytest.approx(expected.item(), rel=1e-9)
    assert out.logs["risk/temperature"].item() == pytest.approx(temperature)
    (grad,) = torch.autograd.grad(out.loss, scores)
    (brute,) = torch.autograd.grad(expected, scores)
    assert torch.allclose(grad, brute, atol=1e-9)


def test_at_a_small_temperature_the_risk_concentrates_on_the_best_tree():
    batch = make_batch(LENGTHS, heads=HEADS)
    scores = random_scores(LENGTHS, seed=5, scale=1.0)
    best = TreeCRF(scores.detach(), batch.lengths).argmax()
    best_errors = sum(int((best[b, 1 : n + 1] != torch.tensor(HEADS[b])).sum()) for b, n in enumerate(LENGTHS))
    risks = []
    for temperature in (1.0, 0.1, 0.01):
        seen = tempered(ParserOutput(TreeCRF(scores, batch.lengths)), temperature)
        risks.append(Risk()(seen, batch).loss)
        brute = _brute_risk(scores, LENGTHS, HEADS, temperature)
        assert risks[-1].item() == pytest.approx(brute.item(), rel=1e-8, abs=1e-12)
    assert risks[-1].item() == pytest.approx(best_errors / sum(LENGTHS), abs=1e-6)
    # the marginals (and so the risk's gradient) concentrate on the best tree's arcs
    marginals = tempered(ParserOutput(TreeCRF(scores, batch.lengths)), 0.01).dist.marginals.detach()
    for b, n in enumerate(LENGTHS):
        on_best = marginals[b, torch.arange(1, n + 1), best[b, 1 : n + 1]]
        assert bool((on_best > 1 - 1e-6).all())
    assert abs(risks[0].item() - best_errors / sum(LENGTHS)) > 1e-3  # at T = 1 it is an average


def test_tempered_entropy_matches_enumeration_and_temperature_one_is_the_identity():
    batch = make_batch(LENGTHS)
    scores = random_scores(LENGTHS, seed=1)
    out = ParserOutput(TreeCRF(scores, batch.lengths))
    assert tempered(out, 1.0) is out
    for temperature in (3.0, 0.5):
        value = WeightedSum((Term("entropy", Entropy(), temperature=Schedule(temperature)),))(out, batch).loss
        assert value.item() == pytest.approx(_brute_entropy(scores, LENGTHS, temperature).item(), rel=1e-9)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        tempered(out, 0.0)


def test_tempered_labels_read_the_same_from_the_grid_and_at_the_heads():
    # A lean output scores labels at the arcs asked for (label_at); tempered divides both forms.
    lengths = [3, 2]
    batch = make_batch(lengths)
    grid = torch.randn(2, 4, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    at_heads = lambda heads: grid.gather(2, heads[..., None, None].expand(2, 4, 1, 5)).squeeze(2)
    dist = TreeCRF(random_scores(lengths, seed=3), batch.lengths)
    heads = torch.tensor([[0, 2, 0, 2], [0, 0, 1, 0]])
    from_grid = tempered(ParserOutput(dist, label_scores=grid), 2.5).labels_on(heads)
    lean = tempered(ParserOutput(dist, label_at=at_heads), 2.5)
    assert torch.allclose(lean.labels_on(heads), from_grid)
    assert torch.allclose(from_grid, at_heads(heads) / 2.5)


def test_a_tempered_term_leaves_the_other_terms_untouched_and_logs_its_temperature():
    batch = make_batch(LENGTHS, heads=HEADS)
    scores = random_scores(LENGTHS, seed=2)
    out = ParserOutput(TreeCRF(scores, batch.lengths))
    plain = WeightedSum((Term("risk", Risk()),))(out, batch)
    both = WeightedSum((Term("risk", Risk()), Term("hot", Risk(), temperature=Schedule(1.0, 4.0, "linear", 10))))
    result = both(out, batch, step=5)
    assert result.logs["risk/loss"] == plain.logs["risk/loss"] and "risk/temperature" not in result.logs
    assert result.logs["hot/temperature"].item() == pytest.approx(2.5)
    assert result.logs["hot/loss"].item() == pytest.approx(_brute_risk(scores, LENGTHS, HEADS, 2.5).item(), rel=1e-9)


def test_ge_weights_each_constraint_divergence():
    spec = parse_spec([{"child": "DET", "parent": "NOUN", "target": 0.9}, {"child": "NOUN", "parent": "VERB", "target": 0.2}],
                      source="test")
    names = ("<pad>", "DET", "NOUN", "VERB")
    batch = make_batch([3], upos=[[1, 2, 3]])
    scores = random_scores([3], seed=4)
    out = ParserOutput(TreeCRF(scores, batch.lengths))
    plain = GeneralizedExpectation(ConstraintSet(spec, names))
    weighted = GeneralizedExpectation(ConstraintSet([replace(spec[0], weight=0.25), spec[1]], names))
    model, _ = plain.proportions(plain.aggregate_of(out, batch))
    targets = torch.tensor([0.9, 0.2], dtype=torch.float64)
    by_hand = 0.25 * (targets[0] - model[0]) ** 2 + (targets[1] - model[1]) ** 2
    assert weighted(out, batch).loss.item() == pytest.approx(by_hand.item(), rel=1e-12)
    assert plain(out, batch).loss.item() == pytest.approx(((targets - model[:2]) ** 2).sum().item(), rel=1e-12)


def test_ge_estimation_options_are_checked_when_the_config_is_resolved():
    with pytest.raises(ValueError, match="features must be one of"):
        build_objective({"ge": {"targets": "estimated", "features": "ud"}}, constraints=None)
    with pytest.raises(ValueError, match="features='templates' needs targets=estimated"):
        build_objective({"ge": {"features": "templates"}})
    with pytest.raises(ValueError, match="'oracle' is estimated already"):
        build_objective({"ge": {"targets": "estimated", "constraints": "oracle"}})
    with pytest.raises(ValueError, match="targets must be one of"):
        build_objective({"ge": {"targets": "rounded"}})
