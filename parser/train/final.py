"""The end of a run: the best checkpoint parses dev and test; predictions (CoNLL-U) and metrics
(JSON: in-loop breakdowns plus the official CoNLL 2018 scores) are written in the run directory."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from parser.data.conllu_io import Treebank, write_conllu
from parser.data.vocab import Vocabularies
from parser.eval.report import SCORED, file_report, metrics_path_for, write_metrics_json
from parser.inference import Annotator
from parser.models.parser_model import ParserModel
from parser.runtime.checkpoint import load_checkpoint
from parser.runtime.io_atomic import atomic_write

__all__ = ["evaluate_split", "format_scores", "restore_best"]

log = logging.getLogger(__name__)


def evaluate_split(
    model: ParserModel,
    treebank: Treebank,
    vocabs: Vocabularies,
    *,
    name: str,
    out_dir: Path,
    tokens_per_batch: int,
    device: torch.device | str,
) -> dict:
    """Parse ``treebank`` (:class:`~parser.inference.Annotator`), write
    ``<out_dir>/<name>.pred.conllu`` and its ``.metrics.json``.

    When sentences of the gold file were skipped as malformed, or the sentences are no file of
    their own (a dev set carved from train), they are written to ``<name>.gold.conllu`` and
    scored against instead, so both files hold the same sentences.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    annotator = Annotator(model, vocabs, score=True,
                          tokens_per_batch=tokens_per_batch, device=device, name=name)
    annotated = annotator.annotate(treebank.sentences)
    pred_path = out_dir / f"{name}.pred.conllu"
    with atomic_write(pred_path) as out:
        out.writelines(annotated.blocks)
    gold_path = Path(treebank.path)
    if treebank.n_skipped or not gold_path.is_file():
        gold_path = out_dir / f"{name}.gold.conllu"
        write_conllu(treebank.sentences, gold_path)
    try:
        report = file_report(gold_path, pred_path)
    except ValueError as error:  # the official script rejected a file: keep the in-loop scores
        log.error("official evaluation of %s failed: %s", pred_path, error)
        report = dict(annotated.scores or {}, official_error=str(error))
    report["split"] = name
    write_metrics_json(report, metrics_path_for(pred_path))
    return report


def restore_best(model: ParserModel, best_path: Path) -> bool:
    """Load ``best.pt``'s weights into ``model`` if it exists; True when loaded."""
    if not best_path.is_file():
        return False
    model.load_state_dict(load_checkpoint(best_path)["model"])
    return True


def format_scores(name: str, report: dict) -> str:
    """``test: UAS 88.12  LAS 85.40`` from a report, then every other official F1 when present
    (``| UPOS 95.10  XPOS ...  BLEX 70.02``)."""
    official = report.get("official")
    if official:
        uas, las = official["UAS"], official["LAS"]
    else:
        uas, las = report.get("uas"), report.get("las")
    show = lambda v: "n/a" if v is None else f"{v:.2f}"
    line = f"{name}: UAS {show(uas)}  LAS {show(las)}"
    if official:
        line += "  | " + "  ".join(f"{metric} {show(official[metric])}" for metric in SCORED
                                   if metric not in ("UAS", "LAS") and metric in official)
    return line
