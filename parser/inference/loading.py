"""A trained parser restored from its checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import OmegaConf

from parser.config import ModelConfig
from parser.data.vocab import Vocabularies
from parser.models.decoder import Decoder
from parser.models.parser_model import ParserModel, build_parser, ud_rules_of, upos_ids
from parser.runtime.checkpoint import CheckpointError, load_checkpoint

__all__ = ["load_decoder", "load_parser", "parser_from_state", "with_overrides"]


def load_parser(
    path: str | Path, *, device: torch.device | str = "cpu"
) -> tuple[ParserModel, Vocabularies, dict]:
    """The model, vocabularies and resolved config stored in a checkpoint (eval mode)."""
    model, vocabs, config = parser_from_state(load_checkpoint(path, map_location="cpu"),
                                              where=f"checkpoint {path}")
    return model.to(device), vocabs, config


def parser_from_state(state: dict, *, where: str) -> tuple[ParserModel, Vocabularies, dict]:
    """The parser of a checkpoint dict (its ``model``, ``vocabs`` and ``config`` entries, and the
    temperatures of a ``calibration`` entry when calibrated), in eval mode on the CPU."""
    if state.get("kind") == "pipeline":
        raise CheckpointError(f"{where}: a pipeline file, not a parser checkpoint (give it as "
                              "pipeline=<file>, or Pipeline.load it)")
    for key in ("model", "vocabs", "config"):
        if key not in state:
            raise CheckpointError(f"{where}: no {key!r} entry; not a parser checkpoint")
    config = state["config"]
    model_cfg = OmegaConf.merge(OmegaConf.structured(ModelConfig), config["model"])
    vocabs = Vocabularies.from_state_dict(state["vocabs"])
    model = build_parser(model_cfg, vocabs.sizes(), upos=vocabs.upos, chars=vocabs.chars,
                         rels=vocabs.rels)
    model.load_state_dict(state["model"])
    calibration = state.get("calibration") or {}
    model.decoder = replace(model.decoder,
                            arc_temperature=float(calibration.get("arc_temperature", 1.0)),
                            label_temperature=float(calibration.get("label_temperature", 1.0)))
    return model.eval(), vocabs, config


def load_decoder(checkpoint: str | Path, *, device: torch.device | str,
                 projective: bool | None = None, attach_to_units: Sequence[str] | None = None,
                 ud_rules: str | Sequence[str] | None = None,
                 ) -> tuple[ParserModel, Vocabularies, dict]:
    """:func:`load_parser` with the decoder options of ``parser-predict`` / ``parser-evaluate``
    applied: ``projective`` overrides ``model.projective``, ``attach_to_units`` (UPOS names)
    ``model.attach_to_units``, ``ud_rules`` (``all``, ``none`` or rule names,
    :mod:`parser.models.ud_rules`) ``model.ud_rules``; None keeps the checkpoint's."""
    model, vocabs, config = load_parser(checkpoint, device=device)
    model.decoder = with_overrides(model.decoder, vocabs, projective=projective,
                                   attach_to_units=attach_to_units, ud_rules=ud_rules)
    return model, vocabs, config


def with_overrides(decoder: Decoder, vocabs: Vocabularies, *, projective: bool | None = None,
                   attach_to_units: Sequence[str] | None = None,
                   ud_rules: str | Sequence[str] | None = None) -> Decoder:
    """``decoder`` with the options of ``parser-predict`` / ``parser-evaluate`` that are not None
    (``attach_to_units``: UPOS names; ``ud_rules``: ``all``, ``none`` or rule names)."""
    changes: dict = {}
    if projective is not None:
        changes["projective"] = projective
    if attach_to_units is not None:
        changes["unit_tags"] = upos_ids(list(attach_to_units), vocabs.upos, option="attach_to_units")
    if ud_rules is not None:
        changes["ud_rules"] = ud_rules_of(ud_rules, vocabs.rels, vocabs.upos)
    return replace(decoder, **changes)
