"""Evaluation reports: attachment and label accuracy with breakdowns by sentence length and by
relation, from per-sentence lists or from a gold and a predicted CoNLL-U file (then with the
official scores too), and their JSON written atomically beside the predictions.

Independent of the data layer: sentences are lists of heads (int, ``-1``/``None`` unannotated) and
relation names, or files read with ``conllu``. Percentages are floats in 0..100.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import conllu
import torch

from parser.data.text_files import open_text
from parser.eval.metrics import AttachmentMetric, universal_relations
from parser.eval.official import official_scores
from parser.runtime.io_atomic import atomic_write

__all__ = [
    "SCORED", "evaluation_report", "file_report", "format_report", "metrics_path_for", "read_aligned_trees",
    "read_trees", "sentence_counts", "write_metrics_json",
]

# The official metrics a report prints: every column a parser predicts, then the tree's.
SCORED = ("UPOS", "XPOS", "UFeats", "AllTags", "Lemmas", "UAS", "LAS", "CLAS", "MLAS", "BLEX")

Heads = Sequence[Sequence["int | None"]]
Rels = Sequence[Sequence["str | None"]]


def evaluation_report(
    gold_heads: Heads, gold_rels: Rels, pred_heads: Heads, pred_rels: Rels | None = None,
    *, batch_size: int = 256,
) -> dict:
    """Scores of predicted trees against gold ones, one list entry per sentence.

    Gold heads of ``-1`` or ``None`` are unannotated and not counted; relations are compared on
    their universal part. Returns ``uas``, ``las``, ``label_acc``, ``n_words``, ``n_sentences``,
    ``by_length`` and ``by_relation`` (see `AttachmentMetric`).

    >>> report = evaluation_report([[2, 0, 2]], [["det", "root", "punct"]],
    ...                            [[2, 0, 1]], [["det", "root", "nmod"]])
    >>> round(report["uas"], 2), round(report["las"], 2), report["by_relation"]["det"]["count"]
    (66.67, 66.67, 1)
    """
    metric, universal = _accumulate(gold_heads, gold_rels, pred_heads, pred_rels, batch_size=batch_size)
    report = dict(metric.compute())
    report["n_sentences"] = len(gold_heads)
    report["by_length"] = metric.by_length()
    report["by_relation"] = metric.by_relation(universal)
    return report


def _accumulate(
    gold_heads: Heads, gold_rels: Rels, pred_heads: Heads, pred_rels: Rels | None, *, batch_size: int,
) -> tuple[AttachmentMetric, list[str]]:
    """The `AttachmentMetric` over all sentences and the universal relation names it is keyed by."""
    if batch_size < 1:
        raise ValueError(f"batch_size: expected a positive integer, got {batch_size}")
    _check_lengths("gold_rels", gold_rels, gold_heads)
    _check_lengths("pred_heads", pred_heads, gold_heads)
    if pred_rels is not None:
        _check_lengths("pred_rels", pred_rels, gold_heads)
    names = sorted({rel for rels in (gold_rels, pred_rels or []) for sent in rels for rel in sent if rel})
    rel_ids = {name: i for i, name in enumerate(names)}
    rel_universal, universal = universal_relations(names)

    metric = AttachmentMetric()
    for start in range(0, len(gold_heads), batch_size):
        part = slice(start, start + batch_size)
        lengths = torch.tensor([len(sent) for sent in gold_heads[part]], dtype=torch.long)
        width = int(lengths.max()) + 1 if len(lengths) else 1
        try:
            metric.update(
                _pad(pred_heads[part], width, lambda h: -1 if h is None else h),
                None if pred_rels is None else _pad(pred_rels[part], width, lambda r: rel_ids.get(r, -1)),
                _pad(gold_heads[part], width, lambda h: -1 if h is None else h),
                _pad(gold_rels[part], width, lambda r: rel_ids.get(r, -1)),
                lengths,
                rel_universal=rel_universal,
            )
        except ValueError as error:  # tensor indices are batch-local: say which sentences
            raise ValueError(f"sentences from {start} on (index 0 = first sentence): {error}") from error
    return metric, universal


def read_trees(path: str | os.PathLike) -> list[dict]:
    """The syntactic words of each sentence of a CoNLL-U file (multiword-token lines and empty
    nodes skipped): dicts with ``sent_id``, ``forms``, ``heads`` (``None`` where ``_``) and
    ``rels``."""
    path = Path(path)
    sentences = []
    try:
        with open_text(path) as file:
            for number, sentence in enumerate(conllu.parse_incr(file), start=1):
                words = [token for token in sentence if isinstance(token["id"], int)]
                sentences.append({
                    "sent_id": sentence.metadata.get("sent_id", f"#{number}"),
                    "forms": [word["form"] for word in words],
                    "heads": [word["head"] for word in words],
                    "rels": [None if word["deprel"] in (None, "_") else word["deprel"] for word in words],
                })
    except (conllu.exceptions.ParseException, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot read CoNLL-U (sentence {len(sentences) + 1}): {error}") from error
    return sentences


def file_report(gold_path: str | os.PathLike, pred_path: str | os.PathLike, *, official: bool = True) -> dict:
    """`evaluation_report` of a prediction file against its gold file, plus ``official`` (F1 of
    the official CoNLL 2018 metrics, see `official_scores`) unless ``official=False``, and the two
    paths. The files must hold the same sentences and words (gold tokenisation): else ValueError
    naming both files and the sentence (see `read_aligned_trees`)."""
    gold_path, pred_path = Path(gold_path), Path(pred_path)
    report = evaluation_report(*_file_columns(gold_path, pred_path))
    if official:
        report["official"] = official_scores(gold_path, pred_path)
    report["gold"], report["prediction"] = str(gold_path), str(pred_path)
    return report


def sentence_counts(gold_path: str | os.PathLike, pred_path: str | os.PathLike) -> torch.Tensor:
    """``[S, 3]`` long, per sentence of the files: words scored, heads correct, heads and
    universal relations correct, counted exactly as `file_report` counts (so the column sums give
    its UAS/LAS, which equal the official script's on gold tokenisation). Errors as `file_report`."""
    metric, _ = _accumulate(*_file_columns(Path(gold_path), Path(pred_path)), batch_size=256)
    return metric.sentence_counts()


def read_aligned_trees(gold_path: str | os.PathLike, pred_path: str | os.PathLike) -> tuple[list, list]:
    """`read_trees` of both files, checked to be the same sentences with the same words and every
    predicted HEAD set; else ValueError naming the prediction file, the sentence (number from 1
    and sent_id) and what differs."""
    gold_path, pred_path = Path(gold_path), Path(pred_path)
    gold, pred = read_trees(gold_path), read_trees(pred_path)
    for number, (g, p) in enumerate(zip(gold, pred), start=1):
        if g["forms"] != p["forms"]:
            raise ValueError(
                f"{pred_path}: sentence {number} (sent_id {p['sent_id']}) has words {p['forms'][:8]}..., "
                f"gold {gold_path} has {g['forms'][:8]}...: tokenisation differs"
            )
        for word, head in enumerate(p["heads"], start=1):
            if head is None:
                raise ValueError(f"{pred_path}: sentence {number} (sent_id {p['sent_id']}) word {word}: HEAD is '_'")
    if len(gold) != len(pred):
        first = min(len(gold), len(pred)) + 1
        where = "missing from it" if len(pred) < len(gold) else "not in the gold file"
        raise ValueError(f"{pred_path} has {len(pred)} sentences, gold {gold_path} has {len(gold)}: "
                         f"sentence {first} on {where}")
    return gold, pred


def _file_columns(gold_path: Path, pred_path: Path) -> tuple[Heads, Rels, Heads, Rels]:
    gold, pred = read_aligned_trees(gold_path, pred_path)
    # '_' is a relation like any other for the official script, so it is one here too.
    return ([g["heads"] for g in gold], [[r or "_" for r in g["rels"]] for g in gold],
            [p["heads"] for p in pred], [[r or "_" for r in p["rels"]] for p in pred])


EVAL_FOLDER = "eval"  # where parser-evaluate writes inside a run folder (beside checkpoints/)


def split_prediction_stem(treebank: str, split: str) -> str:
    """The stem of the file parser-evaluate writes for a treebank's split: ``en_ewt-test``."""
    return f"{treebank}-{split}"


def metrics_path_for(pred_path: str | os.PathLike) -> Path:
    """Where the metrics of a prediction file go: beside it, ``<name>.metrics.json``."""
    pred_path = Path(pred_path)
    return pred_path.with_name(pred_path.stem + ".metrics.json")


def write_metrics_json(metrics: dict, path: str | os.PathLike) -> Path:
    """Write ``metrics`` as JSON atomically (temporary file in the same folder, then rename), NaN
    written as ``null``. Returns the path."""
    path = Path(path)
    text = json.dumps(_plain(metrics, "metrics"), indent=2, allow_nan=False) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as file:
        file.write(text)
    return path


def format_report(report: dict) -> str:
    """A short human-readable summary: overall scores, by length, official F1 if present."""
    def pct(value):
        return "  n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:6.2f}"

    overall = (f"UAS {pct(report['uas'])}  LAS {pct(report['las'])}  label acc {pct(report['label_acc'])}"
               f"  ({report['n_words']} words, {report['n_sentences']} sentences)")
    lines = [overall]
    lines.append("length   sents  words    UAS    LAS")
    for bucket, row in report["by_length"].items():
        lines.append(f"{bucket:7} {row['n_sentences']:6} {row['n_words']:6} {pct(row['uas'])} {pct(row['las'])}")
    if "official" in report:
        lines.append("official F1: " + "  ".join(
            f"{name} {report['official'][name]:.2f}" for name in SCORED if name in report["official"]
        ))
    return "\n".join(lines)


# -- helpers ------------------------------------------------------------------------------------

def _check_lengths(name: str, values: Sequence[Sequence], gold_heads: Heads) -> None:
    if len(values) != len(gold_heads):
        raise ValueError(f"{name}: {len(values)} sentences, gold_heads has {len(gold_heads)}")
    for index, (sent, gold) in enumerate(zip(values, gold_heads)):
        if len(sent) != len(gold):
            raise ValueError(f"{name}: sentence {index} has {len(sent)} words, gold_heads has {len(gold)}")


def _pad(sentences: Sequence[Sequence], width: int, convert) -> torch.Tensor:
    """``[B, N+1]`` long tensor, ROOT at 0, padding 0; ``convert`` maps each value to an int."""
    out = torch.zeros(len(sentences), width, dtype=torch.long)
    for b, sent in enumerate(sentences):
        if sent:
            out[b, 1 : len(sent) + 1] = torch.tensor([convert(v) for v in sent], dtype=torch.long)
    return out


def _plain(value, where: str):
    """JSON-ready copy: tensors and numpy scalars to Python numbers, NaN/inf to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{where}: tensor of shape {tuple(value.shape)} is not a scalar")
        value = value.item()
    elif hasattr(value, "item") and callable(value.item):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return str(value)
    raise ValueError(f"{where}: {type(value).__name__} is not JSON-serialisable")
