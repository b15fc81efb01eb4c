"""The checkpoint set under a kill or a full disk at every write of a save: resume and the final
evaluation then use a consistent pair (the old set or the new one), and a failed write names the
file and the last good checkpoint, leaving nothing newer than the last good set."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from parser.runtime import io_atomic
from parser.runtime.checkpoint import MANIFEST, load_checkpoint
from parser.runtime.checkpoint_file import file_digest, save_checkpoint
from parser.runtime.errors import CheckpointWriteError
from parser.train.loop import Trainer
from parser.train.run import run_training
from tests.faults.helpers import OPTIONS
from tests.train.helpers import tiny_config


class _Killed(BaseException):
    """Stands for kill -9: raised past every ``except Exception``."""


class _Faults:
    """Counts the writes of the file system a save makes (file writes, renames, links, removals)
    and acts at the ``at``-th: ``action(name, where)`` before it runs."""

    def __init__(self, monkeypatch, *, at: int, action: Callable[[str, str], None]) -> None:
        self.count, self.at, self.action = 0, at, action
        real_open, real_replace, real_link, real_unlink = open, os.replace, os.link, os.unlink

        def hit(name: str, where: object) -> None:
            self.count += 1
            if self.count == self.at:
                self.action(name, str(where))

        class Handle:  # a file object whose writes count
            def __init__(self, handle) -> None:
                self._handle = handle

            def write(self, data):
                hit("write", self._handle.name)
                return self._handle.write(data)

            def __getattr__(self, name):
                return getattr(self._handle, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return self._handle.__exit__(*exc)

        def counted(real, name):
            def call(*args, **kwargs):
                hit(name, args[0])
                return real(*args, **kwargs)
            return call

        monkeypatch.setattr(io_atomic, "open", lambda *a, **k: Handle(real_open(*a, **k)), raising=False)
        monkeypatch.setattr(os, "replace", counted(real_replace, "replace"))
        monkeypatch.setattr(os, "link", counted(real_link, "link"))
        monkeypatch.setattr(os, "unlink", counted(real_unlink, "unlink"))


def _saved_run(run_dir: Path) -> Trainer:
    """A trainer whose first checkpoint set (step 3, best) is on disk."""
    trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=3"), run_dir=run_dir)
    trainer.fit()
    return trainer


def _second_save(trainer: Trainer, *, gain: bool) -> None:
    """The save of step 6, with a dev gain or without one."""
    trainer.state.step = 6
    if gain:
        trainer.state.best_step = 6
    trainer.save(best=gain)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("saved")
    _saved_run(run_dir)
    return run_dir


def _count_writes(saved: Path, tmp_path: Path, monkeypatch, *, gain: bool) -> int:
    run_dir = tmp_path / "count"
    shutil.copytree(saved, run_dir)
    trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last"), run_dir=run_dir)
    with monkeypatch.context() as patch:
        faults = _Faults(patch, at=0, action=lambda name, where: None)
        _second_save(trainer, gain=gain)
    return faults.count


def _resumed_pair(run_dir: Path) -> tuple[int, int, int]:
    """(step resumed, the resumed state's best_step, the step of the checkpoint the final
    evaluation scores), after a crash."""
    trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last"), run_dir=run_dir)
    best_path, best_step = trainer.checkpoints.final_best()
    assert best_step == load_checkpoint(best_path)["step"]
    return trainer.state.step, trainer.state.best_step, best_step


@pytest.mark.parametrize("gain", [True, False], ids=["dev-gain", "no-gain"])
def test_a_kill_at_any_write_of_a_save_leaves_the_old_set_or_the_new(saved, tmp_path, monkeypatch, gain):
    writes = _count_writes(saved, tmp_path, monkeypatch, gain=gain)
    assert writes >= 5  # step file (header, payload, rename), manifest (write, rename), ...
    new = (6, 6, 6) if gain else (6, 3, 3)
    seen = set()
    for at in range(1, writes + 2):  # writes + 1: the save completes
        run_dir, crashed = tmp_path / f"run{at}", tmp_path / f"crashed{at}"
        shutil.copytree(saved, run_dir)
        trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last"),
                          run_dir=run_dir)

        def kill(name: str, where: str, run_dir: Path = run_dir, crashed: Path = crashed) -> None:
            shutil.copytree(run_dir, crashed)  # the folder as kill -9 leaves it, then stop
            raise _Killed(f"{name} {where}")

        with monkeypatch.context() as patch:
            _Faults(patch, at=at, action=kill)
            try:
                _second_save(trainer, gain=gain)
            except _Killed:
                pass
        if not crashed.exists():
            shutil.copytree(run_dir, crashed)
        pair = _resumed_pair(crashed)
        assert pair in {(3, 3, 3), new}, f"kill at write {at}: {pair}"
        seen.add(pair)
    assert seen == {(3, 3, 3), new}  # both outcomes were reached


def test_the_issue_reproduction_kill_between_the_step_file_and_best(saved, tmp_path, capsys):
    """step-6.pt written, best.pt still step 3 (the kill the issue found): the final evaluation of
    the resumed run scores the checkpoint its best_step names."""
    run_dir = tmp_path / "run"
    shutil.copytree(saved, run_dir)
    checkpoints = run_dir / "checkpoints"
    trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last"), run_dir=run_dir)
    trainer.state.step = trainer.state.best_step = 6
    state = {**trainer.state_dict(), "step": 6}
    save_checkpoint(state, checkpoints / "step-00000006.pt")  # and then the kill
    cfg = tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last", "trainer.final_eval=true")
    results = run_training(cfg, run_dir=run_dir)
    best = load_checkpoint(results["checkpoint"])
    assert results["state"].best_step == best["step"] == best["trainer"]["best_step"]
    manifest = json.loads((checkpoints / MANIFEST).read_text())
    assert manifest["best"]["step"] == best["step"]
    assert file_digest(checkpoints / "best.pt") == manifest["best"]["sha256"]
    assert "dev: UAS" in capsys.readouterr().out


@pytest.mark.parametrize("gain", [True, False], ids=["dev-gain", "no-gain"])
def test_a_full_disk_at_any_write_names_the_file_and_the_last_good_checkpoint(
        saved, tmp_path, monkeypatch, gain):
    writes = _count_writes(saved, tmp_path, monkeypatch, gain=gain)
    checkpoints = saved / "checkpoints"
    manifest = (checkpoints / MANIFEST).read_bytes()
    for at in range(1, writes + 1):
        run_dir = tmp_path / f"run{at}"
        shutil.copytree(saved, run_dir)
        folder = run_dir / "checkpoints"
        trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last"),
                          run_dir=run_dir)

        def full(name: str, where: str) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        with monkeypatch.context() as patch, pytest.raises(CheckpointWriteError) as caught:
            _Faults(patch, at=at, action=full)
            _second_save(trainer, gain=gain)
        message = str(caught.value)
        assert "No space left on device" in message
        assert f"{folder / 'step-00000003.pt'} (step 3; best.pt: step 3)" in message
        assert any(f"writing {folder / name} failed" in message
                   for name in ("step-00000006.pt", "best.pt", MANIFEST)), message
        # the old set, whole; nothing newer, nothing half-written
        assert (folder / MANIFEST).read_bytes() == manifest
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            p.name for p in checkpoints.iterdir()), at
        assert file_digest(folder / "best.pt") == json.loads(manifest)["best"]["sha256"]


def test_a_run_without_a_manifest_still_resumes(saved, tmp_path, caplog):
    """A folder of an earlier version (no manifest.json) resumes from its newest step file."""
    run_dir = tmp_path / "run"
    shutil.copytree(saved, run_dir)
    (run_dir / "checkpoints" / MANIFEST).unlink()
    with caplog.at_level(logging.INFO):
        trainer = Trainer(tiny_config(*OPTIONS, "trainer.max_steps=6", "trainer.resume=last"),
                          run_dir=run_dir)
    assert "step-00000003.pt (step 3): the newest readable step file, the folder has no " \
           "manifest.json" in caplog.text
    assert trainer.state.step == 3
    assert trainer.checkpoints.final_best()[1] == 3
