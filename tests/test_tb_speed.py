"""``experiments/tb_speed.py``: a run's training speed is the median of its logged windows after
the skipped start-up steps, and a folder without those scalars is refused by name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

REPO = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("tb_speed", REPO / "experiments" / "tb_speed.py")
tb_speed = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tb_speed)


def _run(folder: Path, windows: dict[int, tuple[float, float]]) -> Path:
    with SummaryWriter(str(folder / "tb")) as writer:
        for step, (sentences, tokens) in windows.items():
            writer.add_scalar("train/sentences_per_s", sentences, global_step=step)
            writer.add_scalar("train/tokens_per_s", tokens, global_step=step)
    return folder


def test_median_after_the_skipped_steps(tmp_path: Path, capsys: pytest.CaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The first window (start-up) is slow and skipped; the median of the rest is 100 / 2000.
    run = _run(tmp_path / "run", {10: (1.0, 5.0), 20: (90.0, 1500.0), 30: (100.0, 2000.0),
                                  40: (400.0, 9000.0)})
    found = tb_speed.speeds(run, skip=10)
    assert found["train/sentences_per_s"] == (100.0, 3)
    assert found["train/tokens_per_s"] == (2000.0, 3)
    assert tb_speed.speeds(run, skip=0)["train/sentences_per_s"] == (95.0, 4)
    monkeypatch.setattr("sys.argv", ["tb_speed.py", str(run), "--skip", "10"])
    tb_speed.main()  # the command line prints the same figures
    assert "run: 100.0 sentences/s, 2000 tokens/s (median of 3 windows after step 10)" in capsys.readouterr().out


def test_a_folder_without_speed_scalars_is_refused(tmp_path: Path) -> None:
    with SummaryWriter(str(tmp_path / "empty" / "tb")) as writer:
        writer.add_scalar("train/loss", 1.0, global_step=10)
    with pytest.raises(SystemExit, match="no train/sentences_per_s"):
        tb_speed.speeds(tmp_path / "empty", skip=0)
    run = _run(tmp_path / "short", {10: (5.0, 50.0)})
    with pytest.raises(SystemExit, match="after step 20"):
        tb_speed.speeds(run, skip=20)
