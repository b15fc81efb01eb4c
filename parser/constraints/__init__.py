"""Generalized-expectation constraints: YAML specs, built-in sets and their sparse arc features.

``load_constraints(name_or_path, upos_names)`` returns a ``ConstraintSet``: a built-in set
(``ud_universal``), ``oracle`` (targets estimated from labeled sentences passed as ``heads=`` and
``upos=``), or the path of a YAML file (see ``parser.constraints.spec`` for the format).
``estimated_set`` re-estimates a set's targets (and adds generated templates) from labeled
sentences, unrounded and with confidence weights (``parser.constraints.estimated``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from parser.constraints.estimated import (
    EstimateOptions,
    estimated_constraints,
    gold_counts,
    template_constraints,
)
from parser.constraints.features import ConstraintFeatures, ConstraintSet
from parser.constraints.oracle import oracle_constraints, round_target
from parser.constraints.spec import (
    UPOS_TAGS,
    Constraint,
    ConstraintSpecError,
    parse_spec,
    read_spec,
)

__all__ = [
    "UPOS_TAGS",
    "Constraint",
    "ConstraintFeatures",
    "ConstraintSet",
    "ConstraintSpecError",
    "EstimateOptions",
    "builtin_sets",
    "estimated_constraints",
    "estimated_set",
    "gold_counts",
    "load_constraints",
    "oracle_constraints",
    "parse_spec",
    "read_spec",
    "round_target",
    "template_constraints",
]

SETS_DIR = Path(__file__).resolve().parent / "sets"


def builtin_sets() -> list[str]:
    """Names accepted by ``load_constraints`` besides file paths."""
    return sorted(path.stem for path in SETS_DIR.glob("*.yaml")) + ["oracle"]


def load_constraints(
    name_or_path: str | Path,
    upos_names: Sequence[str],
    *,
    heads: Sequence[Sequence[int]] | None = None,
    upos: Sequence[Sequence[str | int]] | None = None,
    top_k: int = 20,
) -> ConstraintSet:
    """A constraint set bound to ``upos_names`` (the UPOS vocabulary, id -> name).

    name_or_path: a built-in set name (``ud_universal``), ``oracle``, a YAML file path, or several
                  of these (not ``oracle``) joined by ``+`` (``ud_universal+locality``): their
                  constraints in that order.
    heads, upos:  for ``oracle`` only: the labeled sentences to estimate targets from (see
                  ``oracle_constraints``); UPOS as names or ids into ``upos_names``.
    top_k:        for ``oracle``: how many patterns to keep.
    """
    name = str(name_or_path)
    if "+" in name and not Path(name).is_file():
        parts = [part.strip() for part in name.split("+")]
        if "oracle" in parts or "" in parts:
            raise ValueError(f"constraint set {name!r}: join built-in sets or files with '+' (not oracle)")
        joined = [c for part in parts for c in load_constraints(part, upos_names).constraints]
        return ConstraintSet(joined, upos_names, source=name)
    if name == "oracle":
        if heads is None or upos is None:
            raise ValueError("load_constraints('oracle') needs the labeled sentences: pass heads= and upos=")
        constraints = oracle_constraints(heads, upos, top_k=top_k, upos_names=upos_names)
        return ConstraintSet(constraints, upos_names, source="oracle")
    if heads is not None or upos is not None:
        raise ValueError(f"load_constraints({name!r}): heads= and upos= are only for 'oracle'")
    path = SETS_DIR / f"{name}.yaml"
    if not path.is_file():
        path = Path(name_or_path)
    if not path.is_file():
        raise ValueError(
            f"constraint set {name!r}: not a built-in set ({', '.join(builtin_sets())}) nor a file"
        )
    return ConstraintSet(read_spec(path), upos_names, source=str(path))


def estimated_set(
    name_or_path: str | Path,
    upos_names: Sequence[str],
    *,
    heads: Sequence[Sequence[int]],
    upos: Sequence[Sequence[str | int | None]],
    options: EstimateOptions,
) -> ConstraintSet:
    """The constraints of the set ``name_or_path`` (as ``load_constraints`` reads it; not read
    when ``options.features`` is ``templates``), and/or the generated templates, with targets and
    weights estimated from the labeled sentences ``heads``/``upos`` (see
    ``parser.constraints.estimated``)."""
    if str(name_or_path) == "oracle":
        raise ValueError("estimated targets: 'oracle' is estimated already; name a written set (ud_universal)")
    base = () if options.features == "templates" else load_constraints(name_or_path, upos_names).constraints
    constraints = estimated_constraints(base, heads, upos, options=options, upos_names=upos_names)
    which = "templates" if options.features == "templates" else f"{name_or_path}, {options.features}"
    return ConstraintSet(constraints, upos_names, source=f"estimated({which})")
