"""What ``parser-train`` says when its folder fails it: a full disk names the checkpoint that
could not be written and the last good one (exit status 1); a read-only run folder is named
(exit status 2), not Hydra's ``Unable to configure handler 'file'``."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from parser.cli.train import main as train_main
from parser.runtime import checkpoint
from tests.faults.helpers import train_argv


def test_a_full_disk_names_the_file_and_the_last_good_checkpoint(tmp_path, capsys, monkeypatch):
    run_dir, folder = tmp_path / "run", tmp_path / "run" / "checkpoints"
    real_save = checkpoint.save_checkpoint

    def save(state, path):
        if "step-00000006" in str(path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(state, path)

    monkeypatch.setattr(checkpoint, "save_checkpoint", save)
    assert train_main(train_argv(run_dir, "trainer.max_steps=9")) == 1
    err = capsys.readouterr().err
    assert f"writing {folder / 'step-00000006.pt'} failed: [Errno 28] No space left on device" in err
    assert f"the last good checkpoint is {folder / 'step-00000003.pt'} (step 3; best.pt: step 3)" in err
    assert "trainer.resume=last" in err
    assert sorted(p.name for p in folder.iterdir()) == ["best.pt", "manifest.json", "step-00000003.pt"]
    assert "No space left on device" in (run_dir / "train.log").read_text()


@pytest.fixture
def read_only(tmp_path):
    """``make(folder)`` makes ``folder`` read-only for this process: by its mode, or, for root
    (whom modes do not stop), by a read-only bind mount; skipped where neither is possible."""
    mounted = []

    def make(folder):
        if os.geteuid() != 0:
            for path in (folder, *folder.rglob("*")):
                path.chmod(0o555 if path.is_dir() else 0o444)
            return
        for args in (["mount", "--bind", folder, folder],
                     ["mount", "-o", "remount,bind,ro", folder]):
            done = subprocess.run(args, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                pytest.skip(f"cannot make a read-only folder as root here: {done.stderr.strip()}")
            if args[1] == "--bind":
                mounted.append(folder)

    yield make
    for folder in mounted:
        subprocess.run(["umount", folder], check=False)
    for path in (tmp_path, *tmp_path.rglob("*")):
        path.chmod(0o755)


def test_a_read_only_run_folder_is_named(tmp_path, capsys, read_only):
    run_dir = tmp_path / "run"
    assert train_main(train_argv(run_dir, "trainer.max_steps=3")) == 0
    capsys.readouterr()
    read_only(run_dir)
    assert train_main(train_argv(run_dir, "trainer.resume=last", "trainer.max_steps=6")) == 2
    err = capsys.readouterr().err
    assert f"the run folder {run_dir} is not writable" in err, err
    assert "train.log cannot be created" in err and "Unable to configure handler" not in err
