"""The tagger and the tokenizer run on the parser's loop, so they keep its guarantees: a second run
into a folder in use is refused before it writes anything; a run killed with SIGKILL and resumed
with ``trainer.resume=last`` ends with exactly the weights and the dev scores of an uninterrupted
run; ``trainer.max_nonfinite`` non-finite steps in a row stop the run, with no update from them."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from parser.objectives.base import Output
from parser.runtime.checkpoint import load_checkpoint
from parser.runtime.errors import NonFiniteError
from parser.train.loop import Trainer
from tests.faults.helpers import (
    REPO,
    TASK_KINDS,
    Kind,
    assert_same_weights,
    refuse_second_run_then_kill,
)

# 24 steps, a checkpoint every 3, dropout on: data order, RNG streams, optimiser moments and the
# schedule must all come back for the weights to match exactly.
OPTIONS = ["trainer.max_steps=24", "trainer.eval_every=3", "trainer.keep_last=2",
           "trainer.patience=null", "trainer.final_eval=false", "trainer.num_threads=1"]


KINDS = {name: kind for name, kind in TASK_KINDS.items() if name != "parser"}  # the parser's: test_checkpoint_faults


def _argv(kind: Kind, run_dir: Path, *extra: str) -> list[str]:
    return [*kind.tiny, *OPTIONS, *kind.dropout, f"hydra.run.dir={run_dir}", *extra]


def _command(kind: Kind, run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", kind.module, *_argv(kind, run_dir, *extra)]


def _straight(kind: Kind, run_dir: Path, *overrides: str) -> Trainer:
    previous = torch.get_num_threads()
    try:
        trainer = Trainer(kind.compose(*OPTIONS, *kind.dropout, *overrides), run_dir=run_dir,
                          task=kind.task)
        trainer.fit()
    finally:
        torch.set_num_threads(previous)
    return trainer


@pytest.mark.parametrize("name", sorted(KINDS))
def test_second_run_is_refused_and_the_killed_one_resumes_exactly(name, tmp_path, capsys):
    kind = KINDS[name]
    run_dir, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    first = subprocess.Popen(_command(kind, run_dir), cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    refuse_second_run_then_kill(first, run_dir=run_dir, step=3, capsys=capsys,
                                second=lambda: kind.main(_argv(kind, run_dir)))
    killed_at = max(int(p.stem.split("-")[1]) for p in checkpoints.glob("step-*.pt"))
    assert killed_at < 24

    done = subprocess.run(_command(kind, run_dir, "trainer.resume=last"), cwd=REPO, check=False,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed at step" in done.stdout + done.stderr
    # the run says where it wrote and which checkpoint to pass on
    assert f"run folder: {run_dir}\ncheckpoint: {checkpoints / 'best.pt'}\n" in done.stdout
    resumed = load_checkpoint(checkpoints / "step-00000024.pt")

    straight = _straight(kind, tmp_path / "straight")
    assert_same_weights(straight.model.state_dict(), resumed["model"])
    # the same dev scores all along: the best one and where it was reached
    assert resumed["trainer"] == dataclasses.asdict(straight.state)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_non_finite_steps_are_skipped_then_training_stops(name, tmp_path, caplog):
    kind = KINDS[name]
    trainer = Trainer(kind.compose("trainer.max_steps=20", "trainer.max_nonfinite=3"),
                      run_dir=tmp_path, task=kind.task)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    loss = trainer.task.loss

    def poisoned(batch, *, step):
        result = loss(batch, step=step)
        nan = Output(result.output.loss * float("nan"), result.output.logs)
        return dataclasses.replace(result, output=nan)

    trainer.task.loss = poisoned
    with pytest.raises(NonFiniteError, match="3 steps in a row .*max_nonfinite=3"):
        trainer.fit()
    assert trainer.state.nonfinite_total == 3
    assert_same_weights(before, trainer.model.state_dict())  # no update from a skipped step
    assert caplog.text.count("step skipped") == 3


@pytest.mark.parametrize("name", sorted(KINDS))
def test_a_folder_holding_checkpoints_is_refused_without_resume(name, tmp_path, capsys):
    kind = KINDS[name]
    assert kind.main(_argv(kind, tmp_path, "trainer.max_steps=3")) == 0
    assert kind.main(_argv(kind, tmp_path, "trainer.max_steps=3")) == 2
    err = capsys.readouterr().err
    assert "already holds checkpoints" in err and "trainer.resume=last" in err
