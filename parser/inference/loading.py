"""A trained parser restored from its checkpoint."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import OmegaConf

from parser.config import ModelConfig
from parser.data.vocab import Vocabularies
from parser.models.parser_model import ParserModel, build_parser
from parser.runtime.checkpoint import CheckpointError, load_checkpoint

__all__ = ["load_parser"]


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
    model = build_parser(model_cfg, vocabs.sizes(), upos=vocabs.upos, chars=vocabs.chars)
    model.load_state_dict(state["model"])
    return model.to(device).eval(), vocabs, config

