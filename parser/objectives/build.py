"""Build a ``WeightedSum`` from a config mapping (a Hydra ``objective.terms`` node, a dict, or a
dataclass), e.g.::

    {likelihood: {weight: 1.0}, entropy: {weight: 0.1, warmup: 1000}, ge: {criterion: kl}}

Each key names a term; its kind is the key itself or the term's ``type`` option (so two terms of a
kind can coexist: ``{risk_las: {type: risk, labeled: true}}``), looked up in the registry
(``parser.objectives.registry``). Every term accepts ``weight`` (default 1.0; 0, a null weight or
a null entry leaves the term out; other null options mean their default), ``warmup`` (steps,
default 0), ``stream`` (default: the kind's declared stream) and the annealing options
(``parser.objectives.schedule``): ``weight_schedule`` (``constant``, ``linear``, ``cosine`` or
``exponential``) from ``weight_start`` to ``weight`` over ``weight_steps``, and ``temperature``
(default 1; the term sees ``p^(1/T)``) with ``temperature_schedule`` from ``temperature_start``
over ``temperature_steps``; besides its kind's own options (the fields of its registered options
dataclass). :func:`resolve_terms` is the one place where
terms are resolved to kinds: the trainer uses it to find what the terms need (constraints, a
teacher, UPOS) before it builds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from parser.objectives.base import ParserOutput
from parser.objectives.registry import NEEDS, ObjectiveKind, Resources, get_kind
from parser.objectives.schedule import Schedule
from parser.objectives.weighted import Term, WeightedSum

if TYPE_CHECKING:
    from parser.constraints import ConstraintSet
    from parser.data.batch import Batch

__all__ = ["TermSpec", "build_objective", "resolve_terms", "terms_needing"]


@dataclass(frozen=True)
class TermSpec:
    """A term of a config resolved to its kind, with its parsed options (not yet built)."""

    name: str
    kind: ObjectiveKind
    options: Any  # an instance of kind.options
    weight: float
    warmup: int
    stream: str
    weight_schedule: Schedule | None = None
    temperature: Schedule | None = None

    def build(self, resources: Resources) -> Term:
        objective = self.kind.make(self.name, self.options, resources)
        return Term(
            name=self.name, objective=objective, weight=self.weight, warmup=self.warmup, stream=self.stream,
            weight_schedule=self.weight_schedule, temperature=self.temperature,
        )


def resolve_terms(spec: Mapping | object) -> tuple[TermSpec, ...]:
    """The terms of ``spec`` with a non-zero weight, resolved and validated (see the module
    docstring); unknown kinds or options raise ``ValueError``. May be empty."""
    spec = _plain(spec)
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
        kind = get_kind(str(options.get("type", name)), term=name)
        parsed = kind.parse(name, options)
        weight = float(options.get("weight", 1.0))
        weight_schedule, temperature = _schedules(str(name), options, weight=weight)
        if weight == 0.0 and (weight_schedule is None or weight_schedule.first == 0.0):
            continue  # an annealed weight that starts above 0 keeps the term
        terms.append(
            TermSpec(
                name=str(name), kind=kind, options=parsed, weight=weight,
                warmup=int(options.get("warmup", 0)), stream=str(options.get("stream", kind.stream)),
                weight_schedule=weight_schedule, temperature=temperature,
            )
        )
    return tuple(terms)


def _schedules(term: str, options: Mapping, *, weight: float) -> tuple[Schedule | None, Schedule | None]:
    """The term's weight and temperature schedules (None where its options give none)."""
    found = []
    for value, prefix in ((weight, "weight"), (None, "temperature")):
        keys = (f"{prefix}_start", f"{prefix}_schedule", f"{prefix}_steps") + (() if value is not None else (prefix,))
        if not any(key in options for key in keys):
            found.append(None)
            continue
        try:
            end = float(options.get(prefix, 1.0)) if value is None else value
            start = options.get(f"{prefix}_start")
            found.append(Schedule(
                end=end, start=None if start is None else float(start),
                shape=str(options.get(f"{prefix}_schedule", "constant")), steps=int(options.get(f"{prefix}_steps", 0)),
            ))
            if prefix == "temperature" and not (found[-1].first > 0 and end > 0):
                raise ValueError(f"temperatures must be > 0, got {found[-1].first} and {end}")
        except (TypeError, ValueError) as error:
            raise ValueError(f"objective term {term!r}: {prefix} options: {error}") from None
    return found[0], found[1]


def terms_needing(spec: Mapping | object | None, need: str) -> list[str]:
    """The names of the active terms of ``spec`` whose kind declares ``need`` (one of
    ``registry.NEEDS``), e.g. the terms that read UPOS."""
    if need not in NEEDS:
        raise ValueError(f"terms_needing: need must be one of {NEEDS}, got {need!r}")
    return [term.name for term in resolve_terms(spec or {}) if need in term.kind.needs]


def build_objective(
    spec: Mapping | object,
    *,
    constraints: ConstraintSet | None = None,
    teacher: Callable[[Batch], ParserOutput] | None = None,
) -> WeightedSum:
    """A ``WeightedSum`` from ``spec`` (see the module docstring); ``constraints`` feeds the terms
    that need constraints (``ge``) and ``teacher`` those that need a teacher (``kl``). Unknown
    names or options, or a missing resource, raise ``ValueError``."""
    terms = resolve_terms(spec)
    if not terms:
        raise ValueError(f"objective spec {_plain(spec)!r} has no term with a non-zero weight")
    resources = Resources(constraints=constraints, teacher=teacher)
    return WeightedSum(tuple(term.build(resources) for term in terms))


def _plain(value: object) -> object:
    """Dataclasses and mapping-likes (e.g. an OmegaConf node) as plain dicts and lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(item) for item in value]
    return value
