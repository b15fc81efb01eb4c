"""Small builders the trainer and the command-line tools share: device, resume target, objective
(with its GE constraints and KL teacher), and a parser restored from a checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from parser.config import ModelConfig
from parser.constraints import load_constraints
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.objectives import build_objective
from parser.train.checkpoint import CheckpointError, CheckpointManager, load_checkpoint
from parser.train.model import ParserModel, build_parser

__all__ = [
    "build_training_objective",
    "load_parser",
    "resolve_device",
    "resolve_resume",
]

log = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """``auto``: CUDA when present, else the CPU; otherwise a torch device name."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"trainer.device={name!r}: not a device name ({error})") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"trainer.device={name!r}: CUDA is not available on this machine")
    return device


def resolve_resume(
    resume: str | None, *, checkpoints: CheckpointManager, run_dir: Path
) -> dict[str, Any] | None:
    """The checkpoint state to resume from, or None.

    ``last``: the newest readable ``step-*.pt`` of this run's checkpoint directory, else of the
    newest sibling run directory (``outputs/<name>/<time>/checkpoints``); a cut or corrupt file is
    reported and the one before it used. A directory: its newest readable checkpoint. A file:
    that checkpoint (refused if unreadable).
    """
    if not resume:
        return None
    if resume != "last":
        path = Path(resume).expanduser()
        if path.is_dir():
            directory = path / "checkpoints" if (path / "checkpoints").is_dir() else path
            found = CheckpointManager(directory, keep_last=1).load_latest()
            if found is None:
                raise CheckpointError(f"trainer.resume={resume}: no readable checkpoint in {directory}")
            log.info("resuming from %s", found[0])
            return found[1]
        log.info("resuming from %s", path)
        try:
            return load_checkpoint(path)
        except CheckpointError as error:
            raise CheckpointError(f"trainer.resume: {error}") from error
    found = checkpoints.load_latest()
    if found is None:
        siblings = sorted(
            (d / "checkpoints" for d in run_dir.parent.glob("*") if d != run_dir),
            key=lambda d: d.stat().st_mtime if d.is_dir() else 0.0,
        )
        for directory in reversed(siblings):
            found = CheckpointManager(directory, keep_last=1).load_latest()
            if found is not None:
                break
    if found is None:
        raise CheckpointError(
            f"trainer.resume=last: no readable checkpoint in {checkpoints.directory} nor in "
            f"the other runs under {run_dir.parent}"
        )
    log.info("resuming from %s", found[0])
    return found[1]


def load_parser(
    path: str | Path, *, device: torch.device | str = "cpu"
) -> tuple[ParserModel, Vocabularies, dict]:
    """The model, vocabularies and resolved config stored in a checkpoint (eval mode)."""
    state = load_checkpoint(path, map_location="cpu")
    for key in ("model", "vocabs", "config"):
        if key not in state:
            raise CheckpointError(f"checkpoint {path}: no {key!r} entry; not a parser checkpoint")
    config = state["config"]
    model_cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), config["model"])
    vocabs = Vocabularies.from_state_dict(state["vocabs"])
    model = build_parser(model_cfg, vocabs.sizes(), upos=vocabs.upos)
    model.load_state_dict(state["model"])
    return model.to(device).eval(), vocabs, config


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
