from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from parser.runtime.checkpoint import (
    CheckpointError,
    CheckpointManager,
    capture_rng,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)


def test_save_load_round_trip(tmp_path):
    state = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "step": 7, "config": {"a": [1, 2]}}
    path = save_checkpoint(state, tmp_path / "x.pt")
    loaded = load_checkpoint(path)
    assert loaded["step"] == 7 and loaded["config"] == {"a": [1, 2]}
    assert torch.equal(loaded["model"]["w"], state["model"]["w"])
    assert [p.name for p in tmp_path.iterdir()] == ["x.pt"]  # no temp file left behind


def test_truncated_checkpoint_is_refused_with_its_name(tmp_path):
    path = save_checkpoint({"w": torch.randn(1000)}, tmp_path / "cut.pt")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut\.pt .*truncated or corrupt"):
        load_checkpoint(path)


def test_missing_checkpoint(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "nope.pt")


def test_manager_keeps_last_k_and_falls_back_past_a_cut_file(tmp_path, caplog):
    manager = CheckpointManager(tmp_path, keep_last=2)
    for step in (10, 20, 30):
        manager.save({"step": step}, step=step, best=(step == 20))
    assert [p.name for p in manager.step_files()] == ["step-00000020.pt", "step-00000030.pt"]
    assert load_checkpoint(manager.best_path)["step"] == 20
    newest = manager.step_files()[-1]
    newest.write_bytes(newest.read_bytes()[:100])
    path, state = manager.load_latest()
    assert path.name == "step-00000020.pt" and state["step"] == 20
    assert "step-00000030.pt" in caplog.text and "refused" in caplog.text


def test_rng_round_trip_through_a_checkpoint(tmp_path):
    torch.manual_seed(3), np.random.seed(3), random.seed(3)
    save_checkpoint({"rng": capture_rng()}, tmp_path / "rng.pt")
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    torch.manual_seed(99), np.random.seed(99), random.seed(99)
    restore_rng(load_checkpoint(tmp_path / "rng.pt")["rng"])
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected
