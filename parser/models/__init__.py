"""Edge scorers: encoders that turn a Batch into arc scores ``[B, dep, head]`` and label scores
``[B, dep, head, L]``, and the step from scores to the tree CRF (``to_output``)."""

from __future__ import annotations

from parser.models.biaffine import BiaffineScorer
from parser.models.build import SCORERS, build_scorer, scorer_options
from parser.models.edge_scores import LABEL_MODES, EdgeScores, to_output
from parser.models.loglinear import LogLinearScorer

__all__ = [
    "LABEL_MODES",
    "SCORERS",
    "BiaffineScorer",
    "EdgeScores",
    "LogLinearScorer",
    "build_scorer",
    "scorer_options",
    "to_output",
]
