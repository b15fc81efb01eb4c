"""Evaluation: attachment metrics on tensors, the official CoNLL 2018 scorer and UD validator
(``udtools``), evaluation reports written as JSON beside the predictions, and significance tests
of the difference between two prediction files."""

from __future__ import annotations

from parser.eval.metrics import LENGTH_BUCKETS, AttachmentMetric, universal_relations
from parser.eval.official import (
    METRICS,
    OfficialScore,
    format_official_table,
    official_evaluation,
    official_scores,
)
from parser.eval.report import (
    evaluation_report,
    file_report,
    format_report,
    metrics_path_for,
    read_trees,
    write_metrics_json,
)
from parser.eval.significance import Significance, compare_files, compare_runs
from parser.eval.validate import validate_conllu

__all__ = [
    "LENGTH_BUCKETS", "METRICS", "AttachmentMetric", "OfficialScore", "Significance", "compare_files",
    "compare_runs", "evaluation_report", "file_report", "format_official_table", "format_report",
    "metrics_path_for", "official_evaluation", "official_scores", "read_trees", "universal_relations",
    "validate_conllu", "write_metrics_json",
]
