"""Training on a streamed corpus (``data.unlabeled_corpus``): kill -9 and resume equals an
uninterrupted run, bad records are reported as ``train/bad_lines``, the share limit stops a run."""

from __future__ import annotations

import gzip
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from parser.data.conllu_io import read_conllu
from parser.runtime.checkpoint import load_checkpoint
from parser.train.loop import Trainer
from tests.faults.helpers import wait_for_step
from tests.train.helpers import QUIET, TINY_DATA, TINY_MODEL, Recorder, tiny_config

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
OPTIONS = ["trainer.max_steps=15", "trainer.eval_every=3", "trainer.keep_last=2",
           "trainer.patience=null", "model.dropout=0.2", "trainer.final_eval=false",
           "objective=entropy", "data.labeled_size=8", "data.shuffle_buffer=64"]


def _corpus(tmp_path: Path, *, copies: int = 12, bad_every: int = 0) -> Path:
    """The training file's sentences ``copies`` times, shuffled, one tokenised line each, gzip;
    every ``bad_every``-th line undecodable."""
    forms = [" ".join(s.forms) for s in read_conllu(FIXTURES / "tiny-train.conllu").sentences]
    lines = [line.encode() for line in forms * copies]
    random.Random(0).shuffle(lines)
    if bad_every:
        lines = [b"\xff bad" if i % bad_every == 0 else line for i, line in enumerate(lines, 1)]
    path = tmp_path / "corpus.txt.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"\n".join(lines) + b"\n")
    return path


def _command(run_dir: Path, corpus: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "parser.cli.train", *TINY_DATA, *TINY_MODEL, *QUIET, *OPTIONS,
            f"data.unlabeled_corpus={corpus}", "trainer.num_threads=1", f"hydra.run.dir={run_dir}",
            *extra]


def test_sigkill_then_resume_on_a_streamed_corpus_matches_an_uninterrupted_run(tmp_path):
    corpus = _corpus(tmp_path)
    run_dir = tmp_path / "run"
    checkpoints = run_dir / "checkpoints"
    process = subprocess.Popen(_command(run_dir, corpus), cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        wait_for_step(process, checkpoints, 6)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    killed_at = max(int(p.stem.split("-")[1]) for p in checkpoints.glob("step-*.pt"))
    assert 6 <= killed_at < 15
    corpus_state = load_checkpoint(checkpoints / f"step-{killed_at:08d}.pt")["stream"]["unlabeled"]
    assert corpus_state["corpus"]["offset"] > 0 and corpus_state["buffer"]  # mid-file, buffer full
    done = subprocess.run(_command(run_dir, corpus, "trainer.resume=last"), cwd=REPO,
                          check=False, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = load_checkpoint(checkpoints / "step-00000015.pt")

    straight = Trainer(tiny_config(*OPTIONS, f"data.unlabeled_corpus={corpus}"),
                       run_dir=tmp_path / "straight")
    straight.fit()
    assert straight.task.batches.state_dict() == resumed["stream"]
    for name, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed["model"][name]), name


def test_resumed_loss_trajectory_equals_the_uninterrupted_one(tmp_path):
    corpus = _corpus(tmp_path)
    options = [*(o for o in OPTIONS if not o.startswith("trainer.keep_last")), "trainer.keep_last=5",
               f"data.unlabeled_corpus={corpus}", "trainer.log_every=1"]
    straight = Trainer(tiny_config(*options), run_dir=tmp_path / "straight")
    straight.logger = expected = Recorder()
    straight.fit()
    checkpoint = tmp_path / "straight" / "checkpoints" / "step-00000006.pt"
    resumed = Trainer(tiny_config(*options, f"trainer.resume={checkpoint}"), run_dir=tmp_path / "resumed")
    resumed.logger = got = Recorder()
    resumed.fit()
    losses = {step: values["train/total"] for step, values in got.values.items() if "train/total" in values}
    assert sorted(losses) == list(range(7, 16))
    assert losses == {step: expected.values[step]["train/total"] for step in losses}


def test_bad_lines_are_skipped_and_reported(tmp_path):
    corpus = _corpus(tmp_path, bad_every=10)
    cfg = tiny_config(*OPTIONS, f"data.unlabeled_corpus={corpus}", "trainer.log_every=1",
                      "data.max_bad_share=0.2", "trainer.max_steps=8", "logger.arc_entropy=false")
    trainer = Trainer(cfg, run_dir=tmp_path / "run")
    trainer.logger = recorder = Recorder()
    trainer.fit()
    counts = trainer.task.batches.corpus_counts
    assert counts["bad"] > 0 and counts["sentences"] > 0
    logged = [values["train/bad_lines"] for _, values in sorted(recorder.values.items())
              if "train/bad_lines" in values]
    assert logged and logged[-1] == counts["bad"] and logged == sorted(logged)


def test_the_share_limit_stops_the_run_with_the_line(tmp_path):
    corpus = _corpus(tmp_path, bad_every=2)  # half the lines: over 1% of the first 1000
    cfg = tiny_config(*OPTIONS, f"data.unlabeled_corpus={corpus}", "trainer.max_steps=30")
    with pytest.raises(ValueError, match=rf"bad records of .*max_bad_share=0.01.*{corpus}:2: not valid UTF-8"):
        Trainer(cfg, run_dir=tmp_path / "run").fit()
