"""Runs on the tiny fixtures for the fault-injection tests: the command line of a training run,
a byte snapshot of a folder, a reference run's weights, the three tasks of the loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from parser.cli.train import main as parser_main
from parser.cli.train_tagger import main as tagger_main
from parser.cli.train_tokenizer import main as tokenizer_main
from parser.train.loop import Trainer
from parser.train.tasks.parser_task import ParserTask
from parser.train.tasks.tagger_task import TaggerTask
from parser.train.tasks.tokenizer_task import TokenizerTask
from tests.tagger.helpers import TINY_TAGGER, tagger_config
from tests.tokenize.helpers import TINY_TOKENIZER, tokenizer_config
from tests.train.helpers import QUIET, TINY_DATA, TINY_MODEL, tiny_config

REPO = Path(__file__).resolve().parents[2]
# 12 steps, a checkpoint every 3: kills land before, between and during checkpoints
OPTIONS = ["trainer.max_steps=12", "trainer.eval_every=3", "trainer.keep_last=2",
           "trainer.patience=null", "model.dropout=0.2", "trainer.final_eval=false",
           "trainer.num_threads=1"]


@dataclass(frozen=True)
class Kind:
    """One task of the loop, as a test runs it: in process or as its command."""

    module: str
    main: Callable
    task: Callable
    compose: Callable  # the tiny data and model, and overrides
    tiny: tuple[str, ...]  # what ``compose`` adds, for a command line
    dropout: tuple[str, ...]


TASK_KINDS = {
    "parser": Kind("parser.cli.train", parser_main, ParserTask, tiny_config,
                   (*TINY_DATA, *TINY_MODEL, *QUIET), ("model.dropout=0.2",)),
    "tagger": Kind("parser.cli.train_tagger", tagger_main, TaggerTask, tagger_config,
                   ("data=tiny", *TINY_TAGGER), ("tagger.dropout=0.2", "tagger.word_dropout=0.2")),
    "tokenizer": Kind("parser.cli.train_tokenizer", tokenizer_main, TokenizerTask, tokenizer_config,
                      tuple(TINY_TOKENIZER), ("model.dropout=0.2",)),
}


def train_argv(run_dir: Path, *extra: str) -> list[str]:
    """``parser-train`` arguments of a tiny run into ``run_dir``."""
    return [*TINY_DATA, *TINY_MODEL, *QUIET, *OPTIONS, f"hydra.run.dir={run_dir}", *extra]


def train_command(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "parser.cli.train", *train_argv(run_dir, *extra)]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def straight_weights(run_dir: Path, *overrides: str) -> dict[str, torch.Tensor]:
    """The final weights of an uninterrupted in-process run with :data:`OPTIONS`."""
    previous = torch.get_num_threads()
    try:
        trainer = Trainer(tiny_config(*OPTIONS, *overrides), run_dir=run_dir)
        trainer.fit()
    finally:
        torch.set_num_threads(previous)
    return {name: value.clone() for name, value in trainer.model.state_dict().items()}


def assert_same_weights(expected: dict[str, torch.Tensor], found: dict[str, torch.Tensor]) -> None:
    assert expected.keys() == found.keys()
    for name, value in expected.items():
        assert torch.equal(value, found[name]), name


def wait_for_step(process: subprocess.Popen, checkpoints: Path, step: int) -> None:
    """Until ``checkpoints`` holds a ``step-N.pt`` with N >= ``step`` (the run still going)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if any(int(p.stem.split("-")[1]) >= step for p in checkpoints.glob("step-*.pt")):
            return
        time.sleep(0.02)
    raise AssertionError(f"the run ended (status {process.poll()}) or stalled before step {step}")


def refuse_second_run_then_kill(first: subprocess.Popen, *, run_dir: Path, step: int,
                                second: Callable[[], int], capsys) -> None:
    """Freeze ``first`` once it checkpointed ``step`` (possibly mid-write), check that
    ``second()`` (a run into the same folder) is refused by name without changing a byte there,
    then SIGKILL ``first``."""
    try:
        wait_for_step(first, run_dir / "checkpoints", step)
        os.kill(first.pid, signal.SIGSTOP)
        before = snapshot(run_dir)
        assert second() == 2
        err = capsys.readouterr().err
        assert "in use by another run" in err and f"pid {first.pid}" in err
        assert snapshot(run_dir) == before  # not a byte of the first run's folder changed
    finally:
        sigkill(first)


def sigkill(process: subprocess.Popen) -> None:
    """SIGKILL ``process`` (if still running), reap it and check that the signal ended it."""
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
