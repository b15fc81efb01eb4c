"""Training objectives: pure functions of (``ParserOutput``, ``Batch``) returning a normalised loss
and detached logs, composable as a ``WeightedSum`` built by ``build_objective``.

Normalisation: likelihood, local cross-entropy, risk, entropy and KL are per word of the batch;
GE is a sum over constraints of a divergence between proportions.
"""

from __future__ import annotations

from parser.objectives.base import Objective, Output, ParserOutput
from parser.objectives.build import build_objective
from parser.objectives.entropy import Entropy
from parser.objectives.ge import GEAggregate, GeneralizedExpectation
from parser.objectives.ge_cache import ExpectationCache
from parser.objectives.kl import KLToTeacher
from parser.objectives.likelihood import Likelihood
from parser.objectives.local import LocalHeadCrossEntropy
from parser.objectives.risk import Risk
from parser.objectives.weighted import Term, WeightedSum

__all__ = [
    "Entropy",
    "ExpectationCache",
    "GEAggregate",
    "GeneralizedExpectation",
    "KLToTeacher",
    "Likelihood",
    "LocalHeadCrossEntropy",
    "Objective",
    "Output",
    "ParserOutput",
    "Risk",
    "Term",
    "WeightedSum",
    "build_objective",
]
