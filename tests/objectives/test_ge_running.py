"""Corpus-level GE from decayed running totals (``corpus="running"``): the totals against
enumeration, the exact cache it replaces, data-parallel reduction, bounded state and exact resume."""

from __future__ import annotations

import pytest
import torch

from parser.objectives import GeneralizedExpectation, ParserOutput
from parser.objectives.ge_running import RunningTotals
from parser.train.loop import Trainer
from tests.objectives.ge_brute import brute_expectations
from tests.objectives.helpers import TreeCRF, make_batch, random_scores
from tests.objectives.test_ge import LENGTHS, SENTENCES, constraint_set, upos_ids
from tests.train.helpers import tiny_config


def _batches():
    first = make_batch(LENGTHS[:2], upos=upos_ids(SENTENCES[:2]), index=[0, 1])
    second = make_batch(LENGTHS[2:], upos=upos_ids(SENTENCES[2:]), index=[2])
    return first, second


def test_running_totals_are_the_decayed_past_plus_the_live_batch():
    constraints = constraint_set()
    objective = GeneralizedExpectation(constraints, aggregate="corpus", decay=0.5)
    assert objective.corpus == "running"  # the default
    first, second = _batches()
    s_first, s_second = random_scores(LENGTHS[:2], seed=41), random_scores(LENGTHS[2:], seed=42)
    e1, c1 = brute_expectations(s_first, constraints, SENTENCES[:2])
    e2, c2 = brute_expectations(s_second, constraints, SENTENCES[2:])
    one = objective.aggregate_of(ParserOutput(TreeCRF(s_first, first.lengths)), first)
    torch.testing.assert_close(one.expected, e1)  # the first batch is its own aggregate
    two = objective.aggregate_of(ParserOutput(TreeCRF(s_second, second.lengths)), second)
    torch.testing.assert_close(two.expected, 0.5 * e1 + e2)
    torch.testing.assert_close(two.counts, 0.5 * c1 + c2)
    two.expected.sum().backward()  # only the live batch carries the gradient
    assert s_first.grad is None and s_second.grad.abs().sum() > 0
    # A third visit: the past decays again; no batch.index is needed.
    s_third = random_scores(LENGTHS[:2], seed=43)
    e3, _ = brute_expectations(s_third, constraints, SENTENCES[:2])
    three = objective.aggregate_of(ParserOutput(TreeCRF(s_third, first.lengths)), make_batch(LENGTHS[:2], upos=upos_ids(SENTENCES[:2])))
    torch.testing.assert_close(three.expected, 0.25 * e1 + 0.5 * e2 + e3)
    assert objective.running.batches == 3


def test_decay_one_over_one_epoch_equals_the_exact_cache():
    """Each sentence seen once: the undecayed totals are the cache's corpus sum, so the losses agree."""
    constraints = constraint_set()
    running = GeneralizedExpectation(constraints, aggregate="corpus", corpus="running", decay=1.0)
    cache = GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache")
    for batch, seed in zip(_batches(), (44, 45)):
        scores = random_scores(batch.lengths.tolist(), seed=seed)
        want = cache(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
        got = running(ParserOutput(TreeCRF(scores, batch.lengths)), batch)
        torch.testing.assert_close(got.loss, want.loss)
        (grad_got,) = torch.autograd.grad(got.loss, scores)
        (grad_want,) = torch.autograd.grad(want.loss, scores)
        torch.testing.assert_close(grad_got, grad_want)


def test_state_is_bounded_by_the_constraints_not_the_corpus():
    constraints = constraint_set()
    objective = GeneralizedExpectation(constraints, aggregate="corpus")
    batch = make_batch(LENGTHS, upos=upos_ids(SENTENCES), index=[10**8, 10**8 + 1, 10**8 + 2])
    objective(ParserOutput(TreeCRF(random_scores(LENGTHS, seed=46), batch.lengths)), batch)
    state = objective.state_dict()
    assert state["running"]["expected"].shape == (len(constraints.targets),)
    assert state["cache"]["expected"] is None  # the per-sentence cache is never touched


def test_state_round_trip_continues_identically_and_mismatches_are_named():
    constraints = constraint_set()
    first, second = _batches()
    s_first, s_second = random_scores(LENGTHS[:2], seed=47), random_scores(LENGTHS[2:], seed=48)
    original = GeneralizedExpectation(constraints, aggregate="corpus", decay=0.9)
    original(ParserOutput(TreeCRF(s_first, first.lengths)), first)
    state = original.state_dict()
    saved = state["running"]["expected"].clone()
    restored = GeneralizedExpectation(constraints, aggregate="corpus", decay=0.9)
    restored.load_state_dict(state)
    want = original(ParserOutput(TreeCRF(s_second, second.lengths)), second).loss
    got = restored(ParserOutput(TreeCRF(s_second, second.lengths)), second).loss
    assert float(got.detach()) == float(want.detach())
    assert torch.equal(state["running"]["expected"], saved)  # the given state is not mutated
    # Emptied totals change the loss: the state matters.
    fresh = GeneralizedExpectation(constraints, aggregate="corpus", decay=0.9)
    assert float(fresh(ParserOutput(TreeCRF(s_second, second.lengths)), second).loss.detach()) != float(want.detach())
    with pytest.raises(ValueError, match=r"decay=0.9, this term has decay=0.5"):
        GeneralizedExpectation(constraints, aggregate="corpus", decay=0.5).load_state_dict(state)
    # A checkpoint of the exact cache alone (written before the running totals existed).
    old = {"cache": state["cache"]}
    with pytest.raises(ValueError, match="corpus=cache"):
        GeneralizedExpectation(constraints, aggregate="corpus").load_state_dict(old)
    GeneralizedExpectation(constraints, aggregate="corpus", corpus="cache").load_state_dict(old)
    GeneralizedExpectation(constraints).load_state_dict(old)  # aggregate=batch keeps no totals


def test_bad_options_are_named():
    constraints = constraint_set()
    with pytest.raises(ValueError, match="corpus must be one of"):
        GeneralizedExpectation(constraints, aggregate="corpus", corpus="exact")
    for decay in (0.0, 1.5):
        with pytest.raises(ValueError, match=f"decay must be in \\(0, 1\\], got {decay}"):
            GeneralizedExpectation(constraints, aggregate="corpus", decay=decay)
    totals = RunningTotals(decay=0.9)
    with pytest.raises(ValueError, match=r"must both be \[K\]"):
        totals.fold(torch.zeros(2, 3), torch.zeros(2, 3))
    totals.fold(torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="4 constraints, the totals hold 3"):
        totals.fold(torch.zeros(4), torch.ones(4))


class _TwoEqualRanks:
    """Two ranks holding the same batch: sums double."""

    world_size = 2

    def __init__(self) -> None:
        self.calls: list[str] = []

    def token_share(self, batch) -> float:
        return 1.0

    def sum(self, tensor):
        self.calls.append("sum")
        return tensor * 2

    def gather_rows(self, *rows):
        raise AssertionError("running totals gather no rows")


def test_across_ranks_folds_the_global_batch():
    constraints = constraint_set()
    first, second = _batches()
    ranks = _TwoEqualRanks()
    ddp = GeneralizedExpectation(constraints, aggregate="corpus", decay=0.5)
    alone = GeneralizedExpectation(constraints, aggregate="corpus", decay=0.5)
    for batch, seed in zip((first, second), (49, 50)):
        out = ParserOutput(TreeCRF(random_scores(batch.lengths.tolist(), seed=seed), batch.lengths))
        got, want = ddp.across_ranks(out, batch, ranks), alone(out, batch)
        torch.testing.assert_close(got.loss, want.loss)  # doubled totals, the same proportions
    assert ranks.calls == ["sum", "sum"] * 2
    torch.testing.assert_close(ddp.running.expected, 2 * alone.running.expected)


GE_RUNNING = ["objective=likelihood_ge", "objective.terms.ge.warmup=0", "+objective.terms.ge.aggregate=corpus",
              "+objective.terms.ge.decay=0.9", "data.labeled_size=10", "trainer.eval_every=4",
              "trainer.keep_last=10", "trainer.patience=null", "model.dropout=0.3"]


def _ge(trainer: Trainer) -> GeneralizedExpectation:
    return next(t.objective for t in trainer.task.objective.terms if t.name == "ge")


def test_trainer_resumes_the_running_totals_exactly(tmp_path):
    straight = Trainer(tiny_config("trainer.max_steps=8", *GE_RUNNING), run_dir=tmp_path / "a")
    straight.fit()
    assert _ge(straight).corpus == "running" and _ge(straight).running.batches > 0
    checkpoint = tmp_path / "a" / "checkpoints" / "step-00000004.pt"
    resumed = Trainer(tiny_config("trainer.max_steps=8", f"trainer.resume={checkpoint}", *GE_RUNNING),
                      run_dir=tmp_path / "b")
    resumed.fit()
    for name, value in straight.model.named_parameters():
        assert torch.equal(value.detach(), dict(resumed.model.named_parameters())[name].detach()), name
    assert torch.equal(_ge(resumed).running.expected, _ge(straight).running.expected)
    assert _ge(resumed).running.batches == _ge(straight).running.batches
