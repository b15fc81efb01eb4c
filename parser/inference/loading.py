"""A trained parser restored from its checkpoint.

Its dimensions come from the checkpoint's config: before any weight is allocated the model is
built on torch's ``meta`` device (shapes only) and its parameter bytes are compared with the
memory available (:func:`check_model_memory`), so that a config claiming, say,
``model.lstm_hidden=400000`` is refused by name instead of ending in an allocation failure.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import OmegaConf

from parser.config import EncoderKind, ModelConfig
from parser.data.vocab import Vocabularies
from parser.models.decoder import Decoder
from parser.models.parser_model import (
    ParserModel,
    build_parser,
    scorer_kwargs,
    ud_rules_of,
    upos_ids,
)
from parser.runtime.checkpoint import CheckpointError, load_checkpoint

__all__ = ["available_memory", "check_model_memory", "load_decoder", "load_parser",
           "parser_from_state", "with_overrides"]


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
    if model_cfg.encoder.kind == EncoderKind.bilstm and _claims_more(model_cfg, vocabs, state["model"]):
        check_model_memory(model_cfg, vocabs, where=where)
    model = build_parser(model_cfg, vocabs.sizes(), upos=vocabs.upos, chars=vocabs.chars,
                         rels=vocabs.rels, layer_sizes=vocabs.layer_sizes(),
                         layer_vocabs=vocabs.layers)
    model.load_state_dict(state["model"])
    calibration = state.get("calibration") or {}
    model.decoder = replace(model.decoder,
                            arc_temperature=float(calibration.get("arc_temperature", 1.0)),
                            label_temperature=float(calibration.get("label_temperature", 1.0)))
    return model.eval(), vocabs, config


def load_decoder(checkpoint: str | Path, *, device: torch.device | str,
                 projective: bool | None = None, attach_to_units: Sequence[str] | None = None,
                 ud_rules: str | Sequence[str] | None = None, label_grid: bool | None = None,
                 ) -> tuple[ParserModel, Vocabularies, dict]:
    """:func:`load_parser` with the decoder options of ``parser-predict`` / ``parser-evaluate``
    applied: ``projective`` overrides ``model.projective``, ``attach_to_units`` (UPOS names)
    ``model.attach_to_units``, ``ud_rules`` (``all``, ``none`` or rule names,
    :mod:`parser.models.ud_rules`) ``model.ud_rules``, ``label_grid`` ``model.label_grid``; None
    keeps the checkpoint's."""
    model, vocabs, config = load_parser(checkpoint, device=device)
    model.decoder = with_overrides(model.decoder, vocabs, projective=projective,
                                   attach_to_units=attach_to_units, ud_rules=ud_rules,
                                   label_grid=label_grid)
    return model, vocabs, config


def with_overrides(decoder: Decoder, vocabs: Vocabularies, *, projective: bool | None = None,
                   attach_to_units: Sequence[str] | None = None,
                   ud_rules: str | Sequence[str] | None = None,
                   label_grid: bool | None = None) -> Decoder:
    """``decoder`` with the options of ``parser-predict`` / ``parser-evaluate`` that are not None
    (``attach_to_units``: UPOS names; ``ud_rules``: ``all``, ``none`` or rule names)."""
    changes: dict = {}
    if projective is not None:
        changes["projective"] = projective
    if attach_to_units is not None:
        changes["unit_tags"] = upos_ids(list(attach_to_units), vocabs.upos, option="attach_to_units")
    if ud_rules is not None:
        changes["ud_rules"] = ud_rules_of(ud_rules, vocabs.rels, vocabs.upos)
    if label_grid is not None:
        if not label_grid and decoder.labels != "classifier":
            raise ValueError("label_grid=false scores labels on the decoded arcs only: this "
                             "parser's labels are joint (part of the tree CRF)")
        changes["label_grid"] = label_grid
    return replace(decoder, **changes)


def _claims_more(model_cfg, vocabs: Vocabularies, weights: dict) -> bool:
    """Whether a size in the config or the vocabularies exceeds every dimension of the stored
    weights: each size of an honest checkpoint is one of its tensors' dimensions, so its model is
    the weights' size, already in memory. Only then is the exact (meta-device) count needed: the
    meta build's first initialiser imports torch's Python decompositions, about 1 s."""
    stored = max((max(w.shape, default=0) for w in weights.values() if isinstance(w, torch.Tensor)),
                 default=0)
    sizes = [v for v in scorer_kwargs(model_cfg).values()  # the chosen scorer's options only
             if isinstance(v, int) and not isinstance(v, bool)]
    return max([*sizes, *vocabs.sizes().values(), *vocabs.layer_sizes().values()],
               default=0) > stored


def check_model_memory(model_cfg, vocabs: Vocabularies, *, where: str,
                       available: int | None = None) -> int:
    """The bytes of the parameters the config ``model_cfg`` describes, counted on the ``meta``
    device (nothing allocated); a :class:`CheckpointError` naming the largest dimensions of the
    config when they exceed ``available`` (default: :func:`available_memory`). For a BiLSTM
    encoder only: a pretrained one cannot be built on the meta device (its size is its files')."""
    with torch.device("meta"):
        shapes = build_parser(model_cfg, vocabs.sizes(), upos=vocabs.upos, chars=vocabs.chars,
                              rels=vocabs.rels, layer_sizes=vocabs.layer_sizes(),
                              layer_vocabs=vocabs.layers)
    needed = sum(t.numel() * t.element_size() for t in (*shapes.parameters(), *shapes.buffers()))
    available = available_memory() if available is None else available
    if needed > available:
        dims = sorted(((value, key) for key, value in OmegaConf.to_container(model_cfg).items()
                       if isinstance(value, int) and not isinstance(value, bool)), reverse=True)
        largest = ", ".join(f"model.{key}={value}" for value, key in dims[:3])
        raise CheckpointError(
            f"{where}: its config describes a model of {needed:,} bytes of parameters ({largest}"
            f", ...) but {available:,} bytes of memory are available; a config that does not "
            "match its weights (an edited or damaged checkpoint), or a model for a larger machine")
    return needed


def available_memory() -> int:
    """Bytes of memory available to a new allocation: ``MemAvailable`` of ``/proc/meminfo``
    (Linux), else the free physical pages."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
