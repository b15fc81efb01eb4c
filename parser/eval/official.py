"""File-level scores from the official UD evaluation script (CoNLL 2018 / IWPT 2020), as packaged
on PyPI in ``udtools`` (module ``udtools.udeval``), called in-process.

These are the numbers to quote. With gold tokenisation, precision = recall = F1 = aligned accuracy,
and UAS/LAS equal `parser.eval.metrics.AttachmentMetric`'s accuracies exactly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from parser.data.text_files import open_text

__all__ = [
    "ENHANCED_METRICS", "METRICS", "OfficialScore", "format_official_table", "official_evaluation",
    "official_scores",
]

# The rows of the official verbose table, in its order.
METRICS: tuple[str, ...] = (
    "Tokens", "Sentences", "Words", "UPOS", "XPOS", "UFeats", "AllTags", "Lemmas",
    "UAS", "LAS", "CLAS", "MLAS", "BLEX",
)
ENHANCED_METRICS: tuple[str, ...] = ("ELAS", "EULAS")


@dataclass(frozen=True)
class OfficialScore:
    """One row of the official table. Scores are percentages 0..100; ``aligned_accuracy`` is
    ``None`` for rows the script does not compute it for (Tokens, Sentences, Words)."""

    precision: float
    recall: float
    f1: float
    aligned_accuracy: float | None
    correct: int
    gold_total: int
    system_total: int
    aligned_total: int | None


def _load(path: Path, *, role: str, other: Path, multiple_roots_okay: bool):
    from udtools import udeval  # here: its import (regex, udapi) is a prediction's start-up cost

    treebank_type = {"multiple_roots_okay": multiple_roots_okay}
    try:
        with open_text(path) as file:
            return udeval.load_conllu(file, str(path), treebank_type)
    except udeval.UDError as error:
        raise ValueError(
            f"official evaluation: cannot load {role} file {path} (other file: {other}): {error}"
        ) from error


def official_evaluation(
    gold_path: str | os.PathLike, pred_path: str | os.PathLike, *, multiple_roots_okay: bool = False,
    enhanced: bool = False,
) -> dict[str, OfficialScore]:
    """Every row of the official table (`METRICS`, plus ELAS/EULAS when ``enhanced``) as an
    `OfficialScore`.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` naming both files when the
    script rejects them (malformed CoNLL-U, cycles, several roots, different tokenisation).
    """
    from udtools import udeval

    gold_path, pred_path = Path(gold_path), Path(pred_path)
    gold = _load(gold_path, role="gold", other=pred_path, multiple_roots_okay=multiple_roots_okay)
    pred = _load(pred_path, role="prediction", other=gold_path, multiple_roots_okay=multiple_roots_okay)
    try:
        raw = udeval.evaluate(gold, pred)
    except udeval.UDError as error:
        raise ValueError(
            f"official evaluation of prediction {pred_path} against gold {gold_path} failed: {error}"
        ) from error
    names = METRICS + (ENHANCED_METRICS if enhanced else ())
    scores = {}
    for name in names:
        row = raw[name]
        scores[name] = OfficialScore(
            precision=100 * row.precision,
            recall=100 * row.recall,
            f1=100 * row.f1,
            aligned_accuracy=None if row.aligned_accuracy is None else 100 * row.aligned_accuracy,
            correct=row.correct,
            gold_total=row.gold_total,
            system_total=row.system_total,
            aligned_total=row.aligned_total,
        )
    return scores


def official_scores(
    gold_path: str | os.PathLike, pred_path: str | os.PathLike, *, multiple_roots_okay: bool = False,
    enhanced: bool = False,
) -> dict[str, float]:
    """F1 of every official metric (UAS, LAS, CLAS, MLAS, BLEX, UPOS, ... see `METRICS`) as a
    percentage 0..100, exactly the value the script prints (before its rounding to 2 decimals).

    Errors as in `official_evaluation`.
    """
    evaluation = official_evaluation(
        gold_path, pred_path, multiple_roots_okay=multiple_roots_okay, enhanced=enhanced
    )
    return {name: score.f1 for name, score in evaluation.items()}


def format_official_table(scores: dict[str, OfficialScore]) -> str:
    """The official verbose table (precision, recall, F1, aligned accuracy, 2 decimals)."""
    lines = ["Metric     | Precision |    Recall |  F1 Score | AligndAcc",
             "-----------+-----------+-----------+-----------+-----------"]
    for name, s in scores.items():
        aligned = f"{s.aligned_accuracy:10.2f}" if s.aligned_accuracy is not None else ""
        lines.append(f"{name:11}|{s.precision:10.2f} |{s.recall:10.2f} |{s.f1:10.2f} |{aligned}")
    return "\n".join(lines)
