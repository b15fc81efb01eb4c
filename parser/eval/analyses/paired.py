"""Gold and predicted trees of the same sentences, read with the project's CoNLL-U reader.

Multiword-token and empty-node lines are not words (``parser.data.conllu_io`` keeps them out of
``Sentence.heads``). Predictions may have several words on ROOT (an unconstrained decoder's), so
both files are read with ``single_root=False``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from parser.data.conllu_io import Sentence, read_conllu

__all__ = ["percent", "read_pair", "run_on_predictions", "universal_relation"]


def read_pair(gold_path: str | os.PathLike, pred_path: str | os.PathLike) -> list[tuple[Sentence, Sentence]]:
    """``(gold, predicted)`` per sentence; a prediction file that is not the same sentences (count
    or words per sentence) raises ValueError naming it and the first sentence that differs."""
    gold = read_conllu(gold_path, single_root=False)
    predicted = read_conllu(pred_path, single_root=False)
    if len(gold) != len(predicted):
        raise ValueError(f"{pred_path}: {len(predicted)} sentences, {gold_path} has {len(gold)}")
    for g, p in zip(gold, predicted):
        if len(g) != len(p):
            raise ValueError(f"{pred_path}:{p.line}: {len(p)} words, {gold_path}:{g.line} has {len(g)}")
    return list(zip(gold, predicted))


def universal_relation(deprel: str | None) -> str:
    """The universal part of a relation (``"nmod:poss"`` -> ``"nmod"``); ``"_"`` when unset."""
    return "_" if deprel is None else deprel.split(":", 1)[0]


def percent(part: int, whole: int) -> float:
    """``100 * part / whole``; 0 for an empty whole (a file without such words)."""
    return 100 * part / whole if whole else 0.0


def run_on_predictions(argv: Sequence[str], *, usage: str, analyse: Callable[[list], object],
                       report: Callable[[str, object], str]) -> int:
    """The command line of an analysis: ``GOLD PRED...``; the gold file against itself first, then
    each prediction file, each printed by ``report(name, analyse(read_pair(gold, path)))``."""
    if len(argv) < 2:
        print(usage, file=sys.stderr)
        return 2
    gold, *predictions = argv
    print(report(f"gold {gold}", analyse(read_pair(gold, gold))))
    for path in predictions:
        print(report(path, analyse(read_pair(gold, path))))
    return 0
