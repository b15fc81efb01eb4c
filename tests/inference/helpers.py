"""Shared by the tests of prediction alternatives: a tiny trained parser per label mode, the model's
own output for one sentence (every tree of a few words: ``tests.structs.brute.all_trees``)."""

from __future__ import annotations

from pathlib import Path

import torch

from parser.data.batching import collate, encode
from parser.data.conllu_io import Sentence
from parser.train.loop import Trainer
from tests.train.helpers import tiny_config


def train_tiny(run_dir: Path, labels: str) -> Path:
    """A parser trained for 40 steps on the tiny fixture, reading no UPOS (no tagger needed)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    Trainer(tiny_config("trainer.max_steps=40", "trainer.eval_every=40", f"model.labels={labels}",
                        "model.use_upos=false"), run_dir=run_dir).fit()
    torch.set_num_threads(previous)
    return run_dir / "checkpoints" / "best.pt"


def model_output(model, vocabs, sentence: Sentence):
    """The model's output (eval mode) for ``sentence`` alone."""
    batch = collate([encode(sentence, vocabs, index=0)], labeled=False)
    model.eval()
    with torch.no_grad():
        return model(batch)
