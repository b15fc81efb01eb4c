"""Shared by the tests of prediction alternatives: a tiny trained parser per label mode, the model's
own output for one sentence, and every tree of a few words."""

from __future__ import annotations

import itertools
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


def all_trees(n: int, *, single_root: bool = True):
    """Every dependency tree of ``n`` words, as head lists (word i's head at i - 1)."""
    for heads in itertools.product(range(n + 1), repeat=n):
        if any(h == d for d, h in enumerate(heads, start=1)):
            continue
        if single_root and sum(h == 0 for h in heads) != 1:
            continue
        if all(_reaches_root(heads, d) for d in range(1, n + 1)):
            yield list(heads)


def _reaches_root(heads: list[int], dep: int) -> bool:
    seen = set()
    while dep != 0:
        if dep in seen:
            return False
        seen.add(dep)
        dep = heads[dep - 1]
    return True
