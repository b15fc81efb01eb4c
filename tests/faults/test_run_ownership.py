"""Two runs into one folder, and a run killed at a random point: the second run is refused
before it writes anything; the killed run, resumed, ends with an uninterrupted run's weights."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from parser.cli.train import main as train_main
from parser.runtime.checkpoint import load_checkpoint
from tests.faults.helpers import (
    REPO,
    assert_same_weights,
    refuse_second_run_then_kill,
    straight_weights,
    train_argv,
    train_command,
)


def _start(run_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(train_command(run_dir), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _resume(run_dir: Path) -> str:
    done = subprocess.run(train_command(run_dir, "trainer.resume=last"), cwd=REPO, check=False,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_second_run_is_refused_and_the_killed_one_resumes_exactly(tmp_path, capsys):
    run_dir = tmp_path / "run"
    refuse_second_run_then_kill(_start(run_dir), run_dir=run_dir,
                                step=random.Random(18).choice([3, 6, 9]),
                                second=lambda: train_main(train_argv(run_dir)), capsys=capsys)
    assert (run_dir / ".lock").exists()  # left by the killed run: stale
    # a write cut by the kill leaves its temporary file (atomic_write's name)
    (run_dir / "checkpoints" / ".step-00000012.pt.k1ll3d.tmp").write_bytes(b"cut")
    output = _resume(run_dir)
    assert "stale lock taken over" in output
    assert "unfinished checkpoint write" in output
    head = "\n".join(output.splitlines()[:3])
    assert "resuming from" in head and "checkpoints/step-0000000" in head
    resumed = load_checkpoint(run_dir / "checkpoints" / "step-00000012.pt")["model"]
    assert_same_weights(straight_weights(tmp_path / "straight"), resumed)
    assert not (run_dir / ".lock").exists()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_killed_at_random_times_then_resumed_matches(tmp_path, seed):
    """SIGKILL after a random delay (anywhere: start-up, a step, a checkpoint write), resume,
    again, until the run finishes."""
    rng = random.Random(seed)
    run_dir = tmp_path / "run"
    process = _start(run_dir)
    time.sleep(rng.uniform(3.0, 12.0))
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    for _ in range(3):
        if not list((run_dir / "checkpoints").glob("step-*.pt")):
            break
        process = subprocess.Popen(train_command(run_dir, "trainer.resume=last"), cwd=REPO,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(2.0, 8.0))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=240)
    if (run_dir / "checkpoints" / "step-00000012.pt").is_file():
        final = run_dir / "checkpoints" / "step-00000012.pt"
    elif list((run_dir / "checkpoints").glob("step-*.pt")):
        _resume(run_dir)
        final = run_dir / "checkpoints" / "step-00000012.pt"
    else:  # killed before its first checkpoint: nothing to resume, start again
        done = subprocess.run(train_command(run_dir), cwd=REPO, check=False,
                              capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        final = run_dir / "checkpoints" / "step-00000012.pt"
    assert_same_weights(straight_weights(tmp_path / "straight"),
                        load_checkpoint(final)["model"])
