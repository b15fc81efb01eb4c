"""The training objective of a run: ``build_objective(terms)`` with the GE constraint set and the
frozen KL teacher loaded here (the objectives themselves never read files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from omegaconf import OmegaConf

from parser.constraints import load_constraints
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.inference import load_parser
from parser.objectives import build_objective
from parser.runtime.checkpoint import CheckpointError

__all__ = ["build_training_objective"]



def _kind(name: str, options: Mapping) -> str:
    return str(options.get("type", name)) if isinstance(options, Mapping) else name


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
    """``build_objective(terms)`` with the constraint set of a ``ge`` term and the frozen teacher
    of a ``kl`` term loaded here (the objectives never read files)."""
    terms = _unset_as_none(terms) if OmegaConf.is_config(terms) else dict(terms)
    constraints = teacher = None
    for name, options in terms.items():
        if not isinstance(options, Mapping) or not options.get("weight", 1.0):
            continue
        kind = _kind(name, options)
        if kind == "ge" and constraints is None:
            set_name = options.get("constraints") or "ud_universal"
            upos_names = vocabs.upos.tokens
            if set_name == "oracle":
                if not labeled:
                    raise ValueError(f"objective term {name!r}: oracle constraints need labeled trees")
                constraints = load_constraints(
                    "oracle", upos_names, heads=[s.heads for s in labeled],
                    upos=[[u if u is not None else "_" for u in s.upos] for s in labeled],
                    top_k=int(options.get("top_k", 20)),
                )
            else:
                constraints = load_constraints(set_name, upos_names)
        if kind == "kl" and teacher is None:
            checkpoint = options.get("checkpoint")
            if not checkpoint:
                raise ValueError(f"objective term {name!r} (kl): set its checkpoint= (the teacher)")
            try:
                teacher_model, teacher_vocabs, _ = load_parser(checkpoint, device=device)
            except CheckpointError as error:
                raise CheckpointError(f"objective.terms.{name}.checkpoint: {error}") from error
            if teacher_vocabs.state_dict() != vocabs.state_dict():
                raise ValueError(
                    f"objective term {name!r}: the teacher {checkpoint} was trained with other "
                    "vocabularies than this run; train the student on the teacher's data"
                )
            for parameter in teacher_model.parameters():
                parameter.requires_grad_(False)
            teacher = teacher_model
    return build_objective(terms, constraints=constraints, teacher=teacher)
