"""Training objectives: pure functions of (``ParserOutput``, ``Batch``) returning a normalised loss
and detached logs, composable as a ``WeightedSum`` built by ``build_objective``.

Normalisation: likelihood, local cross-entropy, risk, entropy, KL and confident arcs are per word
of the batch;
GE is a sum over constraints of a divergence between proportions.

Each kind of term is a class registered with ``@register(name, stream=..., per_token=...,
needs=..., options=...)`` in its own module (``parser.objectives.registry``). The registry finds
the modules of this package itself (``pkgutil``, before any lookup), so a new objective is one
module here plus a YAML file in ``configs/objective/``; the imports below are the package's public
names, not a list of kinds to keep up to date.
"""

from __future__ import annotations

from parser.objectives.base import Objective, Output, ParserOutput, Ranks
from parser.objectives.build import TermSpec, build_objective, resolve_terms, terms_needing
from parser.objectives.confident_arcs import ConfidentArcs, ConfidentArcsOptions
from parser.objectives.entropy import Entropy
from parser.objectives.ge import GEAggregate, GeneralizedExpectation, GEOptions
from parser.objectives.ge_cache import ExpectationCache
from parser.objectives.ge_running import RunningTotals
from parser.objectives.kl import KLOptions, KLToTeacher
from parser.objectives.likelihood import Likelihood
from parser.objectives.local import LocalHeadCrossEntropy
from parser.objectives.registry import ObjectiveKind, Resources, get_kind, kinds, register
from parser.objectives.risk import Risk
from parser.objectives.weighted import Term, WeightedSum

__all__ = [
    "ConfidentArcs",
    "ConfidentArcsOptions",
    "Entropy",
    "ExpectationCache",
    "GEAggregate",
    "GEOptions",
    "GeneralizedExpectation",
    "KLOptions",
    "KLToTeacher",
    "Likelihood",
    "LocalHeadCrossEntropy",
    "Objective",
    "ObjectiveKind",
    "Output",
    "ParserOutput",
    "Ranks",
    "Resources",
    "Risk",
    "RunningTotals",
    "Term",
    "TermSpec",
    "WeightedSum",
    "build_objective",
    "get_kind",
    "kinds",
    "register",
    "resolve_terms",
    "terms_needing",
]
