"""A training process killed with SIGKILL mid-run and resumed with ``trainer.resume=last`` ends
with exactly the parameters of an uninterrupted run (CPU, same seed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from parser.runtime.checkpoint import load_checkpoint
from parser.train.loop import Trainer
from tests.faults.helpers import sigkill, wait_for_step
from tests.train.helpers import QUIET, TINY_DATA, TINY_MODEL, tiny_config

REPO = Path(__file__).resolve().parents[2]
OPTIONS = ["trainer.max_steps=15", "trainer.eval_every=3", "trainer.keep_last=2", "trainer.patience=null",
           "model.dropout=0.2", "trainer.final_eval=false"]


def _command(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "parser.cli.train", *TINY_DATA, *TINY_MODEL, *QUIET, *OPTIONS,
            "trainer.num_threads=1", f"hydra.run.dir={run_dir}", *extra]


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path):
    run_dir = tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    process = subprocess.Popen(_command(run_dir), cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        wait_for_step(process, checkpoints, 3)
    finally:
        sigkill(process)
    killed_at = max(int(p.stem.split("-")[1]) for p in checkpoints.glob("step-*.pt"))
    assert killed_at < 15

    done = subprocess.run(_command(run_dir, "trainer.resume=last"), cwd=REPO,
                          check=False, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed at step" in done.stdout + done.stderr
    # the run says where it wrote and which checkpoint to pass on
    assert done.stdout.endswith(f"run folder: {run_dir}\ncheckpoint: {checkpoints / 'best.pt'}\n")
    resumed = load_checkpoint(checkpoints / "step-00000015.pt")["model"]

    straight = Trainer(tiny_config(*OPTIONS), run_dir=tmp_path / "straight")
    straight.fit()
    expected = straight.model.state_dict()
    assert expected.keys() == resumed.keys()
    for name, value in expected.items():
        assert torch.equal(value, resumed[name]), name
