"""Edge scorers: encoders that turn a Batch into arc scores ``[B, dep, head]`` and label scores
``[B, dep, head, L]``, the step from scores to the tree CRF (``to_output``), and the parser model
that a checkpoint restores (``ParserModel``, ``build_parser``)."""

from __future__ import annotations

from parser.models.biaffine import BiaffineScorer
from parser.models.build import SCORERS, build_scorer, scorer_options
from parser.models.edge_scores import LABEL_MODES, EdgeScores, to_output
from parser.models.loglinear import LogLinearScorer
from parser.models.parser_model import ParserModel, TreesOnly, build_parser

__all__ = [
    "LABEL_MODES",
    "SCORERS",
    "BiaffineScorer",
    "EdgeScores",
    "LogLinearScorer",
    "ParserModel",
    "TreesOnly",
    "build_parser",
    "build_scorer",
    "scorer_options",
    "to_output",
]
