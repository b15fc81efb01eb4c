"""Fixtures of the layer tests: the tiny treebank with its XPOS and FEATS columns filled (the
fixture files leave them ``_``), and a tiny parser trained on it."""

from __future__ import annotations

from pathlib import Path

import torch

from parser.train.loop import Trainer
from tests.train.helpers import tiny_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# A PTB-like XPOS and a FEATS string per UPOS, so that both columns are learnable from the words.
XPOS = {"NOUN": "NN", "VERB": "VBD", "DET": "DT", "PRON": "PRP", "ADJ": "JJ", "ADV": "RB",
        "ADP": "IN", "PUNCT": ".", "AUX": "VBZ", "PART": "RB", "CCONJ": "CC", "PROPN": "NNP",
        "NUM": "CD", "SCONJ": "IN"}
FEATS = {"NOUN": "Number=Sing", "VERB": "Mood=Ind|Tense=Past|VerbForm=Fin", "DET": "Definite=Def",
         "PRON": "Case=Nom|Person=3", "AUX": "Mood=Ind|Tense=Pres"}


def with_morphology(source: Path, target: Path) -> Path:
    """``source`` with XPOS and FEATS filled from each word's UPOS (XPOS and FEATS above)."""
    lines = []
    for raw in source.read_text(encoding="utf-8").split("\n"):
        cols = raw.split("\t")
        if len(cols) == 10 and cols[0].isdigit():
            cols[4] = XPOS.get(cols[3], "XX")
            cols[5] = FEATS.get(cols[3], "_")
        lines.append("\t".join(cols))
    target.write_text("\n".join(lines), encoding="utf-8")
    return target


def morph_treebank(folder: Path) -> tuple[Path, Path]:
    """(train, dev) files of the tiny treebank with XPOS and FEATS, written into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return (with_morphology(FIXTURES / "tiny-train.conllu", folder / "train.conllu"),
            with_morphology(FIXTURES / "tiny-dev.conllu", folder / "dev.conllu"))


def train_layers(run_dir: Path, train: Path, dev: Path, *overrides: str, steps: int = 60) -> Path:
    """A tiny parser with token-level layers trained on ``train``; returns its best.pt."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        Trainer(tiny_config(f"data.train_file={train}", f"data.dev_file={dev}",
                            f"data.test_file={dev}", f"trainer.max_steps={steps}",
                            f"trainer.eval_every={steps}", "model.use_upos=false", *overrides),
                run_dir=run_dir).fit()
    finally:
        torch.set_num_threads(previous)
    return run_dir / "checkpoints" / "best.pt"
