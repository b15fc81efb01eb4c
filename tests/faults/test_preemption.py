"""Preemption: SIGTERM or SIGUSR1 mid-step finishes the step, saves a checkpoint into the set and
stops with exit status 75; ``trainer.resume=last`` then goes on as if nothing happened (the
same losses, weights and TrainState as an uninterrupted run), for each task of the loop."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from parser.runtime.checkpoint import MANIFEST, load_checkpoint
from parser.runtime.errors import RESUMABLE_STATUS, Preempted
from parser.train.loop import Trainer
from tests.faults.helpers import REPO, TASK_KINDS, Kind, assert_same_weights, wait_for_step

# 12 steps, dev and a checkpoint every 3: the signal comes during step 5 (index 4), between two
OPTIONS = ["trainer.max_steps=12", "trainer.eval_every=3", "trainer.keep_last=2",
           "trainer.patience=null", "trainer.final_eval=false", "trainer.num_threads=1"]
SIGNALS = {"parser": signal.SIGTERM, "tagger": signal.SIGUSR1, "tokenizer": signal.SIGTERM}


def _trainer(kind: Kind, run_dir: Path, *overrides: str) -> Trainer:
    return Trainer(kind.compose(*OPTIONS, *kind.dropout, *overrides), run_dir=run_dir, task=kind.task)


def _record_losses(trainer: Trainer, losses: list[float], *, signal_at: int | None = None,
                   sig: signal.Signals = signal.SIGTERM) -> None:
    """Keep each step's loss; send ``sig`` to this process during step index ``signal_at``."""
    loss = trainer.task.loss

    def recorded(batch, *, step):
        result = loss(batch, step=step)
        if step == signal_at:
            os.kill(os.getpid(), sig)  # handled now, mid-step
        losses.append(float(result.output.loss.detach()))
        return result

    trainer.task.loss = recorded


@pytest.mark.parametrize("name", sorted(TASK_KINDS))
def test_a_signal_mid_step_saves_and_resume_equals_an_uninterrupted_run(name, tmp_path, caplog):
    kind, sig = TASK_KINDS[name], SIGNALS[name]
    previous = torch.get_num_threads()
    try:
        straight, straight_losses = _trainer(kind, tmp_path / "straight"), []
        _record_losses(straight, straight_losses)
        straight.fit()

        run_dir, losses = tmp_path / "run", []
        first = _trainer(kind, run_dir)
        _record_losses(first, losses, signal_at=4, sig=sig)
        with pytest.raises(Preempted, match=rf"{sig.name} received: training stopped after step 5;"
                                            r".*step-00000005\.pt.*trainer\.resume=last"):
            first.fit()
        assert signal.getsignal(sig) is signal.SIG_DFL  # the usual effect back outside fit
        assert f"{sig.name} received: stopping after step 5" in caplog.text
        checkpoints = run_dir / "checkpoints"
        assert json.loads((checkpoints / MANIFEST).read_text())["last"]["step"] == 5

        resumed = _trainer(kind, run_dir, "trainer.resume=last")
        assert resumed.state.step == 5
        _record_losses(resumed, losses)
        resumed.fit()
    finally:
        torch.set_num_threads(previous)
    assert losses == straight_losses  # the same trajectory, bit for bit
    assert_same_weights(straight.model.state_dict(), resumed.model.state_dict())
    assert dataclasses.asdict(resumed.state) == dataclasses.asdict(straight.state)
    final = load_checkpoint(checkpoints / "step-00000012.pt")
    assert final["trainer"] == dataclasses.asdict(straight.state)


def test_sigterm_to_the_command_exits_75_and_the_same_command_resumes(tmp_path):
    kind = TASK_KINDS["parser"]
    run_dir, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    argv = [*kind.tiny, *OPTIONS, "trainer.max_steps=100000", f"hydra.run.dir={run_dir}"]
    command = [sys.executable, "-m", kind.module, *argv]
    first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        wait_for_step(first, checkpoints, 3)
        first.send_signal(signal.SIGTERM)
        err = first.communicate(timeout=120)[1]
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == RESUMABLE_STATUS, err[-2000:]
    assert "parser-train: error: SIGTERM received: training stopped after step" in err
    stopped = json.loads((checkpoints / MANIFEST).read_text())["last"]["step"]
    assert load_checkpoint(checkpoints / f"step-{stopped:08d}.pt")["trainer"]["step"] == stopped

    done = subprocess.run([*command, "trainer.resume=last", f"trainer.max_steps={stopped + 1}"],
                          cwd=REPO, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resumed at step {stopped}" in done.stdout + done.stderr
