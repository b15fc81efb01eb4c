"""The training objective of a run: ``build_objective(terms)`` with the GE constraint set and the
frozen KL teacher (what the terms' kinds declare they need) loaded here (the objectives themselves never read files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from omegaconf import OmegaConf

from parser.constraints import load_constraints
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.inference import load_parser
from parser.models import ParserModel
from parser.objectives import TermSpec, build_objective, resolve_terms
from parser.runtime.checkpoint import CheckpointError

__all__ = ["build_training_objective"]


def _unset_as_none(terms) -> dict:
    """The terms' config as plain containers, an option left at OmegaConf's ``???`` read as None
    (not given) rather than as the string ``"???"`` (a teacher checkpoint named ``???``)."""
    container = OmegaConf.to_container(terms, resolve=True)
    for name, options in terms.items():
        if OmegaConf.is_dict(options):
            for key in options:
                if OmegaConf.is_missing(options, key):
                    container[name][key] = None
    return container


def build_training_objective(
    terms: Mapping[str, Any],
    *,
    vocabs: Vocabularies,
    labeled: Sequence[Sentence],
    device: torch.device | str,
):
    """``build_objective(terms)`` with what the terms' kinds need loaded here (the objectives
    never read files): the constraint set named by the first term that needs ``constraints``,
    the frozen teacher of the first that needs a ``teacher``."""
    terms = _unset_as_none(terms) if OmegaConf.is_config(terms) else dict(terms)
    constraints = teacher = None
    for term in resolve_terms(terms):
        if "constraints" in term.kind.needs and constraints is None:
            constraints = _load_constraint_set(term, vocabs=vocabs, labeled=labeled)
        if "teacher" in term.kind.needs and teacher is None:
            teacher = _load_teacher(term, vocabs=vocabs, device=device)
    return build_objective(terms, constraints=constraints, teacher=teacher)


def _load_constraint_set(term: TermSpec, *, vocabs: Vocabularies, labeled: Sequence[Sentence]):
    set_name, upos_names = term.options.constraints or "ud_universal", vocabs.upos.tokens
    if set_name != "oracle":
        return load_constraints(set_name, upos_names)
    if not labeled:
        raise ValueError(f"objective term {term.name!r}: oracle constraints need labeled trees")
    return load_constraints(
        "oracle", upos_names, heads=[s.heads for s in labeled],
        upos=[[u if u is not None else "_" for u in s.upos] for s in labeled],
        top_k=int(term.options.top_k),
    )


def _load_teacher(term: TermSpec, *, vocabs: Vocabularies, device: torch.device | str) -> ParserModel:
    checkpoint = term.options.checkpoint
    if not checkpoint:
        raise ValueError(f"objective term {term.name!r} ({term.kind.name}): set its checkpoint= (the teacher)")
    try:
        teacher, teacher_vocabs, _ = load_parser(checkpoint, device=device)
    except CheckpointError as error:
        raise CheckpointError(f"objective.terms.{term.name}.checkpoint: {error}") from error
    if teacher_vocabs.state_dict() != vocabs.state_dict():
        raise ValueError(
            f"objective term {term.name!r}: the teacher {checkpoint} was trained with other "
            "vocabularies than this run; train the student on the teacher's data"
        )
    for parameter in teacher.parameters():
        parameter.requires_grad_(False)
    return teacher
