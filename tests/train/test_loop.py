from __future__ import annotations

import pytest
import torch

from parser.data.batching import collate, encode_all
from parser.runtime.checkpoint import load_checkpoint
from parser.train.loop import NonFiniteError, Trainer, all_finite
from tests.train.helpers import tiny_config


def _params(model) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _training_loss(trainer: Trainer) -> float:
    """Objective over every labeled training sentence, in eval mode (no dropout)."""
    batch = collate(encode_all(trainer.task.data.labeled, trainer.task.vocabs), labeled=True)
    trainer.model.eval()
    with torch.no_grad():
        loss = float(trainer.task.objective(trainer.model(batch), batch, step=0).loss)
    trainer.model.train()
    return loss


def test_a_few_steps_lower_the_training_loss(tmp_path):
    cfg = tiny_config("trainer.max_steps=30", "trainer.eval_every=30", "optim.warmup_steps=0",
                      "optim.lr=0.01")
    trainer = Trainer(cfg, run_dir=tmp_path)
    before = _training_loss(trainer)
    state = trainer.fit()
    after = _training_loss(trainer)
    assert state.step == 30
    assert after < 0.8 * before, (before, after)
    assert (tmp_path / "checkpoints" / "best.pt").is_file()
    assert state.best_step == 30 and 0.0 <= state.best_score <= 100.0


def test_resume_continues_exactly_like_a_straight_run(tmp_path):
    # Dropout on, several epochs (the tiny treebank is a few batches): data order, RNG streams,
    # optimiser moments and schedule must all come back for the parameters to match exactly.
    common = ["trainer.eval_every=4", "trainer.keep_last=10", "optim.warmup_steps=3",
              "model.dropout=0.3", "model.word_dropout=0.3", "trainer.patience=null"]
    straight = Trainer(tiny_config("trainer.max_steps=10", *common), run_dir=tmp_path / "a")
    straight.fit()
    checkpoint = tmp_path / "a" / "checkpoints" / "step-00000004.pt"
    assert load_checkpoint(checkpoint)["trainer"]["step"] == 4

    resumed = Trainer(tiny_config("trainer.max_steps=10", f"trainer.resume={checkpoint}", *common),
                      run_dir=tmp_path / "b")
    assert resumed.state.step == 4
    resumed.fit()
    expected, got = _params(straight.model), _params(resumed.model)
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    assert resumed.task.data.stream.state_dict() == straight.task.data.stream.state_dict()
    assert resumed.state == straight.state


def test_resume_last_skips_a_truncated_checkpoint(tmp_path, caplog):
    common = ["trainer.eval_every=2", "trainer.keep_last=3"]
    Trainer(tiny_config("trainer.max_steps=6", *common), run_dir=tmp_path).fit()
    newest = tmp_path / "checkpoints" / "step-00000006.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    resumed = Trainer(tiny_config("trainer.max_steps=8", "trainer.resume=last", *common), run_dir=tmp_path)
    assert resumed.state.step == 4
    assert "step-00000006.pt" in caplog.text and "truncated or corrupt" in caplog.text


def test_resume_from_a_cut_file_is_refused(tmp_path):
    Trainer(tiny_config("trainer.max_steps=2", "trainer.eval_every=2"), run_dir=tmp_path).fit()
    path = tmp_path / "checkpoints" / "step-00000002.pt"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ValueError, match="step-00000002.pt .*refused"):
        Trainer(tiny_config(f"trainer.resume={path}"), run_dir=tmp_path / "again")


def test_non_finite_steps_are_skipped_then_training_stops(tmp_path, caplog):
    trainer = Trainer(tiny_config("trainer.max_steps=20", "trainer.max_nonfinite=3"), run_dir=tmp_path)
    before = _params(trainer.model)
    objective = trainer.task.objective

    def poisoned(out, batch, *, step):
        result = objective(out, batch, step=step)
        return type(result)(result.loss * float("nan"), result.logs)

    trainer.task.objective = poisoned
    with pytest.raises(NonFiniteError, match="3 steps in a row .*max_nonfinite=3"):
        trainer.fit()
    assert trainer.state.nonfinite_total == 3
    for name, value in _params(trainer.model).items():
        assert torch.equal(value, before[name]), name  # no update from a skipped step
    assert caplog.text.count("step skipped") == 3


def test_one_bad_step_is_skipped_and_training_goes_on(tmp_path):
    trainer = Trainer(tiny_config("trainer.max_steps=6", "trainer.eval_every=6"), run_dir=tmp_path)
    objective = trainer.task.objective

    def once_infinite(out, batch, *, step):
        result = objective(out, batch, step=step)
        return type(result)(result.loss * (float("inf") if step == 2 else 1.0), result.logs)

    trainer.task.objective = once_infinite
    state = trainer.fit()
    assert state.step == 6 and state.nonfinite_total == 1 and state.nonfinite_in_row == 0
    assert trainer.scheduler.last_epoch == 5  # the schedule advances on real updates only


def test_early_stopping_after_patience(tmp_path):
    cfg = tiny_config("trainer.max_steps=100", "trainer.eval_every=1", "trainer.patience=2",
                      "optim.lr=1e-9", "optim.warmup_steps=0")
    state = Trainer(cfg, run_dir=tmp_path).fit()
    assert state.stopped_early and state.step < 100
    assert state.evals_without_gain == 2


GE_CORPUS = ["objective=likelihood_ge", "objective.terms.ge.warmup=0",
             "+objective.terms.ge.aggregate=corpus", "+objective.terms.ge.corpus=cache", "data.labeled_size=10",
             "trainer.eval_every=4", "trainer.keep_last=10", "trainer.patience=null",
             "model.dropout=0.3"]


def _ge_cache(trainer: Trainer):
    return next(t.objective for t in trainer.task.objective.terms if t.name == "ge").cache


def test_resume_with_corpus_ge_restores_the_expectation_cache(tmp_path):
    straight = Trainer(tiny_config("trainer.max_steps=10", *GE_CORPUS), run_dir=tmp_path / "a")
    straight.fit()
    checkpoint = tmp_path / "a" / "checkpoints" / "step-00000004.pt"
    saved = load_checkpoint(checkpoint)["objective"]["ge"]["cache"]
    assert int(saved["seen"].sum()) > 0  # unlabeled sentences seen by step 4 are in the file

    resumed = Trainer(tiny_config("trainer.max_steps=10", f"trainer.resume={checkpoint}", *GE_CORPUS),
                      run_dir=tmp_path / "b")
    assert torch.equal(_ge_cache(resumed).expected, saved["expected"])
    resumed.fit()
    for name, value in _params(straight.model).items():
        assert torch.equal(value, dict(resumed.model.named_parameters())[name].detach()), name
    for key in ("expected", "counts", "seen"):
        assert torch.equal(getattr(_ge_cache(resumed), key), getattr(_ge_cache(straight), key)), key

    # The cache matters: resumed with it emptied, the run ends elsewhere.
    emptied = Trainer(tiny_config("trainer.max_steps=10", f"trainer.resume={checkpoint}", *GE_CORPUS),
                      run_dir=tmp_path / "c")
    _ge_cache(emptied).load_state_dict({"expected": None, "counts": None, "seen": None})
    emptied.fit()
    assert any(not torch.equal(p, q) for p, q in zip(straight.model.parameters(), emptied.model.parameters()))


def test_time_budget_stops_training_and_still_checkpoints(tmp_path):
    # a budget already spent: training stops at the first check (every log_every steps), and the
    # end checkpoint is still written, so the final evaluation has a model to score
    trainer = Trainer(tiny_config("trainer.max_steps=100", "trainer.max_minutes=0",
                                  "trainer.log_every=4"), run_dir=tmp_path)
    state = trainer.fit()
    assert state.step == 4
    assert list((tmp_path / "checkpoints").glob("*.pt"))
    budget = Trainer(tiny_config("trainer.max_steps=12", "trainer.max_minutes=60",
                                 "trainer.log_every=4"), run_dir=tmp_path / "b")
    assert budget.fit().step == 12  # an unspent budget changes nothing


def test_a_negative_time_budget_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"trainer.max_minutes=-1.0: must be >= 0"):
        Trainer(tiny_config("trainer.max_minutes=-1"), run_dir=tmp_path)


def test_without_labeled_trees_the_best_checkpoint_is_chosen_on_dev_uas(tmp_path):
    """GE alone learns no relation: dev LAS is ~0 and would pick an arbitrary best.pt."""
    cfg = tiny_config("objective=ge", "data.labeled_size=0", "trainer.max_steps=2", "trainer.eval_every=2",
                      "trainer.final_eval=false", "trainer.patience=null")
    trainer = Trainer(cfg, run_dir=tmp_path)
    scores = {}
    evaluate = trainer.task.dev_score

    def recorded():
        score = evaluate()
        scores.update(score.scalars)
        return score

    trainer.task.dev_score = recorded
    state = trainer.fit()
    assert scores["uas"] != scores["las"]  # the two differ, so the test can tell them apart
    assert state.best_score == scores["uas"] and state.best_step == 2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_all_finite_is_exact_at_any_magnitude(dtype):
    big = torch.full((1000,), torch.finfo(dtype).max, dtype=dtype)  # a plain sum would overflow
    small = torch.randn(7, 3).to(dtype)
    assert all_finite([big, -big, small]) and all_finite([])
    for bad in (float("nan"), float("inf"), float("-inf")):
        spoilt = small.clone()
        spoilt[4, 1] = bad
        assert not all_finite([big, spoilt])
        assert not all_finite([spoilt.requires_grad_()])  # parameters: no graph needed
