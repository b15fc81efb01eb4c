"""Corrupt, truncated and half-written checkpoints: refused by name, skipped when resuming (the
run then ends with the weights of an uninterrupted one), never a silent load."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import torch

from parser.cli.predict import main as predict_main
from parser.cli.train import main as train_main
from parser.runtime.checkpoint import CheckpointError, CheckpointManager, load_checkpoint
from parser.train.loop import Trainer
from tests.faults.helpers import (
    OPTIONS,
    REPO,
    assert_same_weights,
    snapshot,
    straight_weights,
    train_argv,
)
from tests.train.helpers import tiny_config


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> tuple[Path, dict[str, torch.Tensor]]:
    """An uninterrupted run (checkpoints at steps 3..12, the last 2 kept) and its final weights."""
    run_dir = tmp_path_factory.mktemp("straight")
    return run_dir, straight_weights(run_dir, "trainer.keep_last=4")


def _flip(path: Path, *, at: float = 0.6) -> None:
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_flipped_byte_is_refused_with_the_file_name(straight, tmp_path):
    corrupt = tmp_path / "best.pt"
    shutil.copy(straight[0] / "checkpoints" / "best.pt", corrupt)
    _flip(corrupt)
    with pytest.raises(CheckpointError, match=rf"{corrupt}.*corrupt.*sha256"):
        load_checkpoint(corrupt)


def test_predict_refuses_a_corrupt_checkpoint_by_name(straight, tmp_path, capsys):
    corrupt = tmp_path / "best.pt"
    shutil.copy(straight[0] / "checkpoints" / "best.pt", corrupt)
    _flip(corrupt)
    output = tmp_path / "out.conllu"
    status = predict_main([f"checkpoint={corrupt}", f"input={REPO}/tests/fixtures/tiny-dev.conllu",
                           f"output={output}"])
    assert status == 2
    assert f"{corrupt}" in capsys.readouterr().err
    assert not output.exists()


def test_resume_skips_corrupt_and_truncated_checkpoints(straight, tmp_path, caplog):
    """Kept: steps 6, 9, 12 of a run cut at 12 -> 12 flipped, 9 truncated, a stray temporary
    file of a killed write: resume=last goes back to step 6 and ends with the straight weights."""
    run_dir = tmp_path / "run"
    shutil.copytree(straight[0] / "checkpoints", run_dir / "checkpoints")
    checkpoints = run_dir / "checkpoints"
    (checkpoints / "step-00000003.pt").unlink()
    _flip(checkpoints / "step-00000012.pt")
    nine = checkpoints / "step-00000009.pt"
    nine.write_bytes(nine.read_bytes()[: nine.stat().st_size // 2])
    stray = checkpoints / ".step-00000015.pt.k1ll3d.tmp"
    stray.write_bytes(b"half of a checkpoint")
    with caplog.at_level(logging.INFO):
        trainer = Trainer(tiny_config(*OPTIONS, "trainer.resume=last"), run_dir=run_dir)
    text = caplog.text
    assert "step-00000012.pt" in text and "corrupt" in text
    assert "step-00000009.pt" in text and "truncated or corrupt" in text
    assert "removed 1 unfinished checkpoint write" in text and not stray.exists()
    assert "resuming from" in text and "step-00000006.pt" in text
    assert trainer.state.step == 6
    trainer.fit()
    assert_same_weights(straight[1], trainer.model.state_dict())


def test_resume_last_never_takes_another_runs_checkpoint(straight, tmp_path, capsys):
    """A run killed while writing its first checkpoint (only a temporary file left), beside a
    finished run: resume=last refuses, and the neighbour is untouched."""
    outputs = tmp_path / "outputs"
    neighbour = outputs / "2024-01-01_00-00-00"
    shutil.copytree(straight[0] / "checkpoints", neighbour / "checkpoints")
    before = snapshot(neighbour)
    killed = outputs / "2024-01-01_00-05-00"
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "checkpoints" / ".step-00000003.pt.k1ll3d.tmp").write_bytes(b"cut")
    status = train_main(train_argv(killed, "trainer.resume=last"))
    err = capsys.readouterr().err
    assert status == 2
    assert f"no readable checkpoint in {killed / 'checkpoints'}" in err
    assert snapshot(neighbour) == before
    assert not (killed / ".hydra").exists()


def test_resume_last_refuses_a_checkpoint_of_another_config(straight, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert train_main(train_argv(run_dir, "trainer.max_steps=3")) == 0
    before = {k: v for k, v in snapshot(run_dir).items() if not k.endswith(".log")}
    # another seed is another run; a longer budget is the same run continued
    status = train_main(train_argv(run_dir, "trainer.resume=last", "trainer.seed=2"))
    err = capsys.readouterr().err
    assert status == 2
    assert "written with another config" in err and "trainer.seed: 1 -> 2" in err
    after = {k: v for k, v in snapshot(run_dir).items() if not k.endswith(".log")}
    assert after == before  # the record (.hydra/overrides.yaml) included
    assert train_main(train_argv(run_dir, "trainer.resume=last", "trainer.max_steps=6")) == 0
    assert (run_dir / "checkpoints" / "step-00000006.pt").is_file()
    assert "trainer.resume=last" in (run_dir / ".hydra" / "overrides.yaml").read_text()


def test_run_limits_and_messages(tmp_path):
    with pytest.raises(ValueError, match=r"trainer.max_nonfinite=-1: must be >= 0"):
        Trainer(tiny_config("trainer.max_nonfinite=-1"), run_dir=tmp_path / "run")
    manager = CheckpointManager(tmp_path / "empty", keep_last=1)
    assert "no checkpoint was written yet" in manager.describe_saved()
