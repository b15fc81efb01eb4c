"""Build a ``WeightedSum`` from a config mapping (a Hydra ``objective`` group, a dict, or a
dataclass), e.g.::

    {likelihood: {weight: 1.0}, entropy: {weight: 0.1, warmup: 1000}, ge: {criterion: kl}}

Each key names a term; its kind is the key itself or the term's ``type`` option (so two terms of a
kind can coexist: ``{risk_las: {type: risk, labeled: true}}``). Every term accepts ``weight``
(default 1.0; 0, a null weight or a null entry leaves the term out; other null options
mean their default), ``warmup`` (steps, default 0) and ``stream``
(default: ``labeled`` for likelihood, local and risk; ``unlabeled`` for entropy, ge and kl). Kind
options: risk ``labeled``; entropy ``alpha``; ge ``criterion``, ``aggregate``, ``eps`` (and
``constraints``, ``top_k``: which set the trainer loads and passes as ``constraints=``, ignored
here); kl ``direction``, ``tree`` (and ``checkpoint``: the teacher the trainer loads and passes as
``teacher=``, ignored here).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from parser.objectives.base import ParserOutput
from parser.objectives.entropy import Entropy
from parser.objectives.ge import GeneralizedExpectation
from parser.objectives.kl import KLToTeacher
from parser.objectives.likelihood import Likelihood
from parser.objectives.local import LocalHeadCrossEntropy
from parser.objectives.risk import Risk
from parser.objectives.weighted import Term, WeightedSum

if TYPE_CHECKING:
    from parser.constraints import ConstraintSet
    from parser.data.batch import Batch

DEFAULT_STREAM = {
    "likelihood": "labeled",
    "local": "labeled",
    "risk": "labeled",
    "entropy": "unlabeled",
    "ge": "unlabeled",
    "kl": "unlabeled",
}
KIND_OPTIONS = {
    "likelihood": set(),
    "local": set(),
    "risk": {"labeled"},
    "entropy": {"alpha"},
    "ge": {"criterion", "aggregate", "eps", "constraints", "top_k"},
    "kl": {"direction", "checkpoint", "tree"},
}
TERM_OPTIONS = {"type", "weight", "warmup", "stream"}
KNOWN = tuple(DEFAULT_STREAM)


def build_objective(
    spec: Mapping | object,
    *,
    constraints: ConstraintSet | None = None,
    teacher: Callable[[Batch], ParserOutput] | None = None,
) -> WeightedSum:
    """A ``WeightedSum`` from ``spec`` (see the module docstring); ``constraints`` feeds a ``ge``
    term and ``teacher`` a ``kl`` term. Unknown names or options raise ``ValueError``."""
    spec = _plain(spec, where="objective spec")
    if not isinstance(spec, Mapping):
        raise ValueError(f"objective spec must be a mapping of term name -> options, got {spec!r}")  # noqa: TRY004 (project convention: bad input is a ValueError)
    terms = []
    for name, options in spec.items():
        options = {} if options is True else options
        if options is None or options is False:
            continue
        if not isinstance(options, Mapping):
            raise ValueError(f"objective term {name!r}: options must be a mapping, got {options!r}")  # noqa: TRY004 (project convention: bad input is a ValueError)
        if "weight" in options and options["weight"] is None:
            continue
        # A null option means its default (structured configs carry every field).
        options = {key: value for key, value in options.items() if value is not None}
        kind = options.get("type", name)
        if kind not in DEFAULT_STREAM:
            raise ValueError(f"objective term {name!r}: unknown objective {kind!r}; known: {', '.join(KNOWN)}")
        unknown = sorted(set(options) - TERM_OPTIONS - KIND_OPTIONS[kind])
        if unknown:
            allowed = sorted(TERM_OPTIONS | KIND_OPTIONS[kind])
            raise ValueError(f"objective term {name!r} ({kind}): unknown options {unknown}; allowed: {allowed}")
        weight = float(options.get("weight", 1.0))
        if weight == 0.0:
            continue
        objective = _make(kind, name, options, constraints=constraints, teacher=teacher)
        terms.append(
            Term(
                name=str(name),
                objective=objective,
                weight=weight,
                warmup=int(options.get("warmup", 0)),
                stream=options.get("stream", DEFAULT_STREAM[kind]),
            )
        )
    if not terms:
        raise ValueError(f"objective spec {spec!r} has no term with a non-zero weight")
    return WeightedSum(tuple(terms))


def _make(kind: str, name: str, options: Mapping, *, constraints, teacher):
    if kind == "likelihood":
        return Likelihood()
    if kind == "local":
        return LocalHeadCrossEntropy()
    if kind == "risk":
        return Risk(labeled=bool(options.get("labeled", False)))
    if kind == "entropy":
        return Entropy(alpha=float(options.get("alpha", 1.0)))
    if kind == "ge":
        if constraints is None:
            raise ValueError(
                f"objective term {name!r} (ge) needs constraints=: load them with "
                "parser.constraints.load_constraints(name, upos_names)"
            )
        return GeneralizedExpectation(
            constraints,
            criterion=options.get("criterion", "squared"),
            aggregate=options.get("aggregate", "batch"),
            eps=float(options.get("eps", 1e-6)),
        )
    if teacher is None:
        raise ValueError(f"objective term {name!r} (kl) needs teacher=, a callable Batch -> ParserOutput")
    return KLToTeacher(teacher, direction=options.get("direction", "forward"), tree=options.get("tree"))


def _plain(value: object, *, where: str) -> object:
    """Dataclasses and mapping-likes (e.g. an OmegaConf node) as plain dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item, where=f"{where}.{key}") for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(item, where=where) for item in value]
    return value
