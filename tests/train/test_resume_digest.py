"""Resume checks each file the manifest names against the manifest's sha256: a step file
overwritten through ``best.pt`` (its other name: ``cp other/best.pt run/checkpoints/best.pt``) is
reported by name with both digests, and ``trainer.resume=last`` falls back to the newest intact
checkpoint before it, or refuses when there is none (docs/scaling.md, "One checkpoint set")."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from parser.runtime import checkpoint_file
from parser.runtime.checkpoint import MANIFEST, CheckpointError, CheckpointManager, load_checkpoint
from parser.runtime.checkpoint_file import file_digest
from parser.train.loop import Trainer
from parser.train.resume import resolve_resume
from tests.faults.helpers import OPTIONS
from tests.train.helpers import tiny_config

CONFIG = {"trainer": {"seed": 1, "max_steps": 9}}


def _state(step: int, best_step: int, *, tag: str = "ours") -> dict:
    """A checkpoint state as the trainer writes it, as far as resume reads it."""
    return {"step": step, "tag": tag, "trainer": {"step": step, "best_step": best_step},
            "config": CONFIG}


def _run(folder: Path, *, keep_last: int, saves: list[tuple[int, bool]],
         tag: str = "ours") -> CheckpointManager:
    """A run's checkpoint folder after ``saves`` ((step, dev gain) each)."""
    manager = CheckpointManager(folder, keep_last=keep_last)
    manager.prepare(option="trainer.checkpoint_dir", resuming=False)
    best = -1
    for step, gain in saves:
        best = step if gain else best
        manager.save(_state(step, best, tag=tag), step=step, best=gain)
    return manager


def _other_best(tmp_path: Path) -> Path:
    """Another run's ``best.pt``: same config, step 4."""
    return _run(tmp_path / "other", keep_last=1, saves=[(4, True)], tag="theirs").best_path


def _copy_onto_best(source: Path, folder: Path) -> Path:
    """``cp source folder/best.pt``: writes into the file, so into the step file it is a link of."""
    best = folder / "best.pt"
    shutil.copyfile(source, best)
    return best


def _resumed(folder: Path, *, keep_last: int, resume: str = "last") -> tuple[CheckpointManager, dict]:
    """The next run's checkpoint set and the state it resumes from."""
    manager = CheckpointManager(folder, keep_last=keep_last)
    manager.prepare(option="trainer.checkpoint_dir", resuming=True)
    return manager, resolve_resume(resume, checkpoints=manager, config=CONFIG)


def test_the_copy_writes_through_the_hard_link(tmp_path):
    """The issue's premise: the step file is changed with best.pt, under its own name."""
    folder = tmp_path / "run"
    _run(folder, keep_last=2, saves=[(3, True), (6, True)])
    step_file = folder / "step-00000006.pt"
    before = file_digest(step_file)
    _copy_onto_best(_other_best(tmp_path), folder)
    assert os.path.samefile(step_file, folder / "best.pt")
    assert file_digest(step_file) != before
    assert load_checkpoint(step_file)["step"] == 4  # readable: only the manifest tells


def test_an_overwritten_last_is_named_and_resume_falls_back(tmp_path, caplog):
    folder = tmp_path / "run"
    _run(folder, keep_last=2, saves=[(3, True), (6, True)])
    expected = json.loads((folder / MANIFEST).read_text())["last"]["sha256"]
    found = file_digest(_copy_onto_best(_other_best(tmp_path), folder))
    with caplog.at_level(logging.INFO):
        manager, state = _resumed(folder, keep_last=2)
    assert state["trainer"]["step"] == 3 and state["tag"] == "ours"  # not the copy's step 4
    warning = next(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert f"{folder / 'step-00000006.pt'} is not the checkpoint of step 6 that {MANIFEST}" in warning
    assert found in warning and expected in warning and "falling back" in warning
    assert f"resuming from {folder / 'step-00000003.pt'}" in caplog.text
    best_path, best_step = manager.final_best()  # the resumed state's best: step 3
    assert best_step == 3 and os.path.samefile(best_path, folder / "step-00000003.pt")


def test_an_overwritten_last_with_nothing_before_it_is_refused_by_name(tmp_path):
    folder = tmp_path / "run"
    _run(folder, keep_last=1, saves=[(3, True), (6, True)])  # only step 6 kept
    _copy_onto_best(_other_best(tmp_path), folder)
    with pytest.raises(CheckpointError) as refused:
        _resumed(folder, keep_last=1)
    message = str(refused.value)
    assert f"{folder / 'step-00000006.pt'} is not the checkpoint of step 6" in message
    assert "put the run's own file back" in message and "trainer.resume=<path>" in message


def test_an_overwritten_older_best_is_dropped_and_the_last_resumed(tmp_path, caplog):
    folder = tmp_path / "run"
    _run(folder, keep_last=1, saves=[(3, True), (6, False)])  # step 3 kept: it is the best
    _copy_onto_best(_other_best(tmp_path), folder)
    with caplog.at_level(logging.WARNING):
        manager, state = _resumed(folder, keep_last=1)
    assert state["trainer"]["step"] == 6
    assert f"{folder / 'step-00000003.pt'} is not the checkpoint of step 3" in caplog.text
    assert "the best checkpoint of the resumed run (step 3) is overwritten" in caplog.text
    best_path, best_step = manager.final_best()  # not the copy: the last checkpoint
    assert best_step == 6 and best_path == folder / "step-00000006.pt"


def test_a_folder_named_by_resume_falls_back_too(tmp_path, caplog):
    folder = tmp_path / "old" / "checkpoints"
    _run(folder, keep_last=2, saves=[(3, True), (6, True)])
    _copy_onto_best(_other_best(tmp_path), folder)
    with caplog.at_level(logging.WARNING):
        _, state = _resumed(tmp_path / "new", keep_last=2, resume=str(folder.parent))
    assert state["trainer"]["step"] == 3
    assert f"{folder / 'step-00000006.pt'} is not the checkpoint of step 6" in caplog.text


def test_a_file_named_by_resume_is_used_with_the_warning(tmp_path, caplog):
    folder = tmp_path / "old" / "checkpoints"
    _run(folder, keep_last=2, saves=[(3, True), (6, True)])
    _copy_onto_best(_other_best(tmp_path), folder)
    with caplog.at_level(logging.WARNING):
        _, state = _resumed(tmp_path / "new", keep_last=2, resume=str(folder / "best.pt"))
    assert state["tag"] == "theirs" and state["step"] == 4  # the user's choice: the copy
    assert f"{folder / 'best.pt'} is not the checkpoint of step 6" in caplog.text


def test_an_intact_set_resumes_without_a_warning(tmp_path, caplog):
    folder = tmp_path / "run"
    _run(folder, keep_last=2, saves=[(3, True), (6, False), (9, True)])
    with caplog.at_level(logging.WARNING):
        manager, state = _resumed(folder, keep_last=2)
    assert state["trainer"]["step"] == 9 and not caplog.records
    assert manager.final_best()[1] == 9


def test_a_digest_check_reads_the_header_alone(tmp_path, monkeypatch):
    """The check costs a header read, not a second pass over the file."""
    folder = tmp_path / "run"
    manager = _run(folder, keep_last=1, saves=[(3, True)])
    sizes = []
    real_open = open

    class Counted:
        def __init__(self, handle) -> None:
            self._handle = handle

        def read(self, size=-1):
            sizes.append(size)
            return self._handle.read(size)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._handle.__exit__(*exc)

    monkeypatch.setattr(checkpoint_file, "open", lambda *a, **k: Counted(real_open(*a, **k)),
                        raising=False)
    assert manager.overwritten(folder / "step-00000003.pt") is None
    assert sizes and all(0 < size < 200 for size in sizes)



def test_a_trainer_resumes_from_its_own_checkpoint_not_the_copy(tmp_path, caplog):
    """The issue end to end: a run whose last save (step 6) was a dev gain, another run's best.pt
    (step 3, a config resume accepts) copied onto its best.pt. ``trainer.resume=last`` used to
    resume from the copy at its step 3 without a word; now it says so and resumes from the run's
    own step 3, then goes on to a set whose manifest matches its files again."""
    run_dir, other_dir = tmp_path / "run", tmp_path / "other"
    trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=3"), run_dir=run_dir)
    trainer.fit()
    trainer.state.step = trainer.state.best_step = 6
    trainer.save(best=True)
    Trainer(tiny_config(*OPTIONS, "trainer.max_steps=3", "trainer.patience=50"),
            run_dir=other_dir).fit()
    checkpoints = run_dir / "checkpoints"
    _copy_onto_best(other_dir / "checkpoints" / "best.pt", checkpoints)
    with caplog.at_level(logging.INFO):
        resumed = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last"),
                          run_dir=run_dir)
    assert f"{checkpoints / 'step-00000006.pt'} is not the checkpoint of step 6" in caplog.text
    assert f"resuming from {checkpoints / 'step-00000003.pt'}" in caplog.text
    assert resumed.state.step == 3
    resumed.fit()
    manifest = json.loads((checkpoints / MANIFEST).read_text())
    assert manifest["last"]["step"] == 6
    assert manifest["last"]["sha256"] == file_digest(checkpoints / "step-00000006.pt")
