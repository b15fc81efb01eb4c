"""The objective registry: what each kind of term is, resolved in this one place.

A kind is a class registered with :func:`register`, which declares

- ``name``: the key (or ``type:`` option) of its terms in ``objective.terms``;
- ``stream``: the batches it reads by default, ``labeled`` (gold trees), ``unlabeled`` or ``any``;
- ``per_token``: ``True`` when its loss is a mean over the batch's words (data-parallel ranks then
  reduce it by token share); ``False`` when it is a statistic of the whole batch or corpus, in which
  case the class must define ``across_ranks(out, batch, ranks) -> Output`` (see
  ``parser.objectives.base.Ranks``), the hook ``WeightedSum`` calls under data parallelism;
- ``needs``: a subset of :data:`NEEDS`: ``upos`` (it reads the batch's UPOS, so untagged unlabeled
  text needs a tagger), ``constraints`` (a ``ConstraintSet`` the trainer loads from the options
  ``constraints``/``top_k``) or ``teacher`` (a frozen parser the trainer loads from the option
  ``checkpoint``);
- ``options``: the dataclass of its own options (those besides :data:`TERM_OPTIONS`). By default
  the class itself (its fields are the options and the parsed options are the objective); a kind
  with ``constraints`` or ``teacher`` names another dataclass and builds itself with a classmethod
  ``from_options(options, resources)``.

Discovery: the registry imports every module of the ``parser.objectives`` package (``pkgutil``)
before it answers a lookup, so a new module's ``@register`` runs without any import list to update;
a class registered elsewhere (a test, a plugin) counts once its module is imported. Kinds are
listed labeled first, then unlabeled, then ``any``, each alphabetically:

>>> [kind.name for kind in kinds()][:7]
['likelihood', 'local', 'risk', 'confident_arcs', 'entropy', 'ge', 'kl']
>>> get_kind("ge").needs == {"upos", "constraints"}, get_kind("ge").per_token
(True, False)
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parser.constraints import ConstraintSet
    from parser.data.batch import Batch
    from parser.objectives.base import Objective, ParserOutput

__all__ = [
    "NEEDS",
    "NEED_OPTIONS",
    "SCHEDULE_OPTIONS",
    "STREAMS",
    "TERM_OPTIONS",
    "ObjectiveKind",
    "Resources",
    "get_kind",
    "kinds",
    "register",
]

STREAMS = ("labeled", "unlabeled", "any")
NEEDS = ("upos", "constraints", "teacher")
# The options through which the trainer finds what a need names (parser.train.objective).
NEED_OPTIONS = {"upos": (), "constraints": ("constraints", "top_k"), "teacher": ("checkpoint",)}
# Every term's options: its kind, weight and warm-up, stream, and annealing (weighted.py).
SCHEDULE_OPTIONS = frozenset({
    "weight_start", "weight_schedule", "weight_steps",
    "temperature", "temperature_start", "temperature_schedule", "temperature_steps",
})
TERM_OPTIONS = frozenset({"type", "weight", "warmup", "stream"}) | SCHEDULE_OPTIONS

_KINDS: dict[str, ObjectiveKind] = {}
_discovered = False


@dataclass(frozen=True)
class Resources:
    """What the trainer loads for the terms that need it (objectives never read files)."""

    constraints: ConstraintSet | None = None
    teacher: Callable[[Batch], ParserOutput] | None = None


@dataclass(frozen=True)
class ObjectiveKind:
    """One registered kind of objective term (see the module docstring)."""

    name: str
    objective: type
    options: type
    stream: str
    per_token: bool
    needs: frozenset[str]

    @property
    def option_names(self) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(self.options) if f.init)

    def parse(self, term: str, options: Mapping[str, Any]) -> Any:
        """The kind's options dataclass from ``options`` (term options removed, nulls dropped)."""
        own = {key: value for key, value in options.items() if key not in TERM_OPTIONS}
        unknown = sorted(set(own) - self.option_names)
        if unknown:
            allowed = sorted(TERM_OPTIONS | self.option_names)
            raise ValueError(f"objective term {term!r} ({self.name}): unknown options {unknown}; allowed: {allowed}")
        floats = {f.name for f in dataclasses.fields(self.options) if f.type in (float, "float")}
        for key in floats & set(own):
            if not isinstance(own[key], bool):
                try:
                    own[key] = float(own[key])
                except (TypeError, ValueError):
                    raise ValueError(f"objective term {term!r} ({self.name}): {key}={own[key]!r} is not a number") from None
        return self.options(**own)

    def make(self, term: str, options: Any, resources: Resources) -> Objective:
        """The objective of a term from its parsed ``options`` and the trainer's ``resources``."""
        if "constraints" in self.needs and resources.constraints is None:
            raise ValueError(
                f"objective term {term!r} ({self.name}) needs constraints=: load them with "
                "parser.constraints.load_constraints(name, upos_names)"
            )
        if "teacher" in self.needs and resources.teacher is None:
            raise ValueError(f"objective term {term!r} ({self.name}) needs teacher=, a callable Batch -> ParserOutput")
        if self.options is self.objective:
            return options
        return self.objective.from_options(options, resources)


def register(
    name: str, *, stream: str, per_token: bool = True, needs: tuple[str, ...] = (), options: type | None = None
) -> Callable[[type], type]:
    """Class decorator: register the class as the objective kind ``name`` (module docstring).
    A bad declaration, or a second class under a taken name, raises ``ValueError``."""

    def decorate(cls: type) -> type:
        kind = ObjectiveKind(
            name=name, objective=cls, options=cls if options is None else options, stream=stream,
            per_token=per_token, needs=frozenset(needs),
        )
        _check(kind)
        known = _KINDS.get(name)
        if known is not None and known.objective is not cls:
            raise ValueError(
                f"register({name!r}): {cls.__module__}.{cls.__qualname__} but "
                f"{known.objective.__module__}.{known.objective.__qualname__} has that name"
            )
        _KINDS[name] = kind
        return cls

    return decorate


def _check(kind: ObjectiveKind) -> None:
    where = f"register({kind.name!r}) on {kind.objective.__qualname__}"
    if not kind.name or "/" in kind.name:
        raise ValueError(f"{where}: the name must be non-empty without '/'")
    if kind.stream not in STREAMS:
        raise ValueError(f"{where}: stream must be one of {STREAMS}, got {kind.stream!r}")
    unknown = sorted(kind.needs - set(NEEDS))
    if unknown:
        raise ValueError(f"{where}: unknown needs {unknown}; known: {list(NEEDS)}")
    if not dataclasses.is_dataclass(kind.options):
        raise ValueError(f"{where}: options must be a dataclass, got {kind.options!r}")
    clash = sorted(kind.option_names & TERM_OPTIONS)
    if clash:
        raise ValueError(f"{where}: options {clash} clash with the options of every term")
    for need in kind.needs:
        missing = [option for option in NEED_OPTIONS[need] if option not in kind.option_names]
        if missing:
            raise ValueError(f"{where}: needs {need!r}, so its options must have {missing}")
    if {"constraints", "teacher"} & kind.needs and kind.options is kind.objective:
        raise ValueError(f"{where}: a kind with constraints or a teacher needs an options dataclass and from_options")
    if kind.options is not kind.objective and not callable(getattr(kind.objective, "from_options", None)):
        raise ValueError(f"{where}: with options={kind.options.__qualname__} it must define from_options(options, resources)")
    hook = callable(getattr(kind.objective, "across_ranks", None))
    if not kind.per_token and not hook:
        raise ValueError(f"{where}: per_token=False needs across_ranks(out, batch, ranks), its reduction over ranks")
    if kind.per_token and hook:
        raise ValueError(f"{where}: per_token=True but it defines across_ranks; declare per_token=False")


def _discover() -> None:
    """Import every module of this package once, so that each ``@register`` has run. (Discovery,
    not a way round an import cycle: the modules import this one at their top.)"""
    global _discovered
    if _discovered:
        return
    package = importlib.import_module(__package__)
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{__package__}.{module.name}")
    _discovered = True


def kinds() -> tuple[ObjectiveKind, ...]:
    """Every registered kind: labeled, unlabeled, then ``any`` stream, each by name."""
    _discover()
    return tuple(sorted(_KINDS.values(), key=lambda kind: (STREAMS.index(kind.stream), kind.name)))


def get_kind(name: str, *, term: str | None = None) -> ObjectiveKind:
    """The kind registered as ``name``; ``ValueError`` listing the known ones otherwise
    (``term``: the term that asked, for the message)."""
    _discover()
    if name not in _KINDS:
        known = ", ".join(kind.name for kind in kinds())
        who = f"objective term {term!r}: " if term is not None else ""
        raise ValueError(f"{who}unknown objective {name!r}; known: {known}")
    return _KINDS[name]
