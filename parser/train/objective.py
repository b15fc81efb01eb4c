"""The training objective of a run: ``build_objective(terms)`` with the GE constraint set and the
frozen KL teacher (what the terms' kinds declare they need) loaded here (the objectives themselves never read files)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from parser.constraints import EstimateOptions, estimated_set, load_constraints
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.inference import load_parser
from parser.models import ParserModel, TreesOnly
from parser.objectives import TermSpec, build_objective, resolve_terms
from parser.runtime.checkpoint import CheckpointError

__all__ = ["build_training_objective", "load_teacher", "taught_from_start"]

log = logging.getLogger(__name__)


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
    loaded_teacher: tuple[ParserModel, Vocabularies] | None = None,
):
    """``build_objective(terms)`` with what the terms' kinds need loaded here (the objectives
    never read files): the constraint set named by the first term that needs ``constraints``,
    the frozen teacher of the terms that need a ``teacher`` (all must name the same checkpoint;
    ``loaded_teacher``: that checkpoint as :func:`load_teacher` read it, not read again)."""
    terms = _unset_as_none(terms) if OmegaConf.is_config(terms) else dict(terms)
    constraints = teacher = None
    resolved = resolve_terms(terms)
    # One teacher serves every term that needs one (kl, confident_arcs): they must name the same.
    named = {term.name: term.options.checkpoint for term in resolved if "teacher" in term.kind.needs}
    if len(set(named.values())) > 1:
        raise ValueError(f"objective terms {sorted(named)} name different teachers {named}: a run has one teacher")
    for term in resolved:
        if "constraints" in term.kind.needs and constraints is None:
            constraints = _load_constraint_set(term, vocabs=vocabs, labeled=labeled)
        if "teacher" in term.kind.needs and teacher is None:
            teacher = _frozen_teacher(term, loaded_teacher or load_teacher(terms, device=device),
                                      vocabs=vocabs)
    return build_objective(terms, constraints=constraints, teacher=teacher)


def taught_from_start(terms: Mapping[str, Any], init: str | os.PathLike | None) -> list[str]:
    """The names of the terms whose teacher checkpoint is the file ``init`` (``model.init``): a
    student that starts at its own teacher, which its teacher's terms then hold where it starts
    (in issue 46's simulation a confident-arc student warm-started from its teacher barely learned
    a round's new trees: experiments/annotation_sim.py, ``words_selftrain``)."""
    if not init:
        return []
    terms = _unset_as_none(terms) if OmegaConf.is_config(terms) else dict(terms)
    start = Path(init).resolve()
    return [term.name for term in resolve_terms(terms) if "teacher" in term.kind.needs
            and term.options.checkpoint and Path(term.options.checkpoint).resolve() == start]


def load_teacher(terms: Mapping[str, Any], *, device: torch.device | str) -> tuple[ParserModel, Vocabularies] | None:
    """The model and vocabularies of the run's teacher checkpoint (None: no term names one). A
    new student takes the vocabularies, so that a teacher trained without the unlabeled text (a
    distillation corpus, the training file read again) reads the student's batches word for word."""
    terms = _unset_as_none(terms) if OmegaConf.is_config(terms) else dict(terms)
    for term in resolve_terms(terms):
        if "teacher" in term.kind.needs:
            if not term.options.checkpoint:
                raise ValueError(f"objective term {term.name!r} ({term.kind.name}): set its checkpoint= (the teacher)")
            try:
                return load_parser(term.options.checkpoint, device=device)[:2]
            except CheckpointError as error:
                raise CheckpointError(f"objective.terms.{term.name}.checkpoint: {error}") from error
    return None


def _load_constraint_set(term: TermSpec, *, vocabs: Vocabularies, labeled: Sequence[Sentence]):
    """The term's constraint set; ``oracle`` and ``targets: estimated`` read ``labeled``, the run's
    labeled training trees (never dev or test)."""
    set_name, upos_names = term.options.constraints or "ud_universal", vocabs.upos.tokens
    estimated = getattr(term.options, "targets", "given") == "estimated"
    if set_name != "oracle" and not estimated:
        return load_constraints(set_name, upos_names)
    if not labeled:
        what = "estimated targets" if estimated else "oracle constraints"
        raise ValueError(f"objective term {term.name!r}: {what} need labeled trees (data.labeled_size > 0)")
    heads = [s.heads for s in labeled]
    upos = [[u if u is not None else "_" for u in s.upos] for s in labeled]
    if estimated:
        options = term.options
        estimate = EstimateOptions(
            features=options.features, smoothing=float(options.smoothing), min_count=int(options.min_count),
            confidence=options.confidence, kappa=float(options.kappa),
        )
        constraints = estimated_set(set_name, upos_names, heads=heads, upos=upos, options=estimate)
        log.info("objective term %r: %d constraints with targets estimated from %d labeled trees (%s)",
                 term.name, len(constraints), len(labeled), constraints.source)
        return constraints
    return load_constraints("oracle", upos_names, heads=heads, upos=upos, top_k=int(term.options.top_k))


def _frozen_teacher(term: TermSpec, loaded: tuple[ParserModel, Vocabularies], *,
                    vocabs: Vocabularies) -> TreesOnly:
    teacher, teacher_vocabs = loaded
    if teacher_vocabs.state_dict() != vocabs.state_dict():
        raise ValueError(
            f"objective term {term.name!r}: the teacher {term.options.checkpoint} was trained with "
            "other vocabularies than this run (resumed or model.init: the student's are its own); "
            "warm-start from a student of this teacher, or start afresh"
        )
    for parameter in teacher.parameters():
        parameter.requires_grad_(False)
    return teacher.trees_only()  # the terms read its trees: its layer heads would be wasted work
