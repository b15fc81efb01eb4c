"""Typed schema of the tagger's own Hydra config tree (``configs/tagger/``).

``configs/tagger/tagger.yaml`` starts its defaults with ``tagger_base_config`` (:class:`TaggerRunConfig`),
so a misspelt key or a wrong type fails when the config is composed. The ``trainer``, ``logger``
and ``optim`` nodes are the parser's (:class:`~parser.config.TrainerConfig`, ...: one training
loop, ``parser.train``), composed from the shared groups of ``configs/`` (tagger.yaml adds them to
Hydra's search path); ``data``, ``tagger`` (the model's sizes) and ``objective`` are the tagger's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from parser.config import LoggerConfig, OptimConfig, TrainerConfig, config_dir

__all__ = ["TagDataConfig", "TaggerConfig", "TaggerRunConfig", "register_tagger_configs",
           "tagger_config_dir"]

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TagDataConfig:
    """Treebank files (``<root>/<treebank>/<treebank>-ud-<split>.conllu`` unless a ``*_file`` is
    set; ``root`` null: ``$UD_ROOT``, then ``<repo>/data/ud``) and batching.

    ``labeled_size``: keep the UPOS of only this many training sentences (a seeded subset,
    nested across sizes); the others become unlabeled text for the entropy / GE terms, drawn
    ``unlabeled_ratio`` batches per labeled batch.
    """

    treebank: str = "en_ewt"
    root: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    min_freq: int = 2
    tokens_per_batch: int = 2000
    eval_tokens_per_batch: int = 10000
    max_length: int = 150  # longer training sentences are skipped (counted)
    labeled_size: int | None = None
    unlabeled_ratio: float = 1.0
    subset_seed: int = 0
    max_train_sentences: int | None = None  # the first n training sentences, for quick runs


@dataclass
class TaggerConfig:
    """The model's sizes (see ``parser.tagger.model.Tagger``)."""

    word_dim: int = 100
    char_dim: int = 50
    char_hidden: int = 100
    char_out: int = 100
    lstm_hidden: int = 200
    lstm_layers: int = 2
    dropout: float = 0.33
    word_dropout: float = 0.25


@dataclass
class TaggerRunConfig:
    data: TagDataConfig = field(default_factory=TagDataConfig)
    tagger: TaggerConfig = field(default_factory=TaggerConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    # {term name: options}; a `ge` term also takes top_forms, suffixes, smoothing (its
    # constraints: see parser.tagger.data.build_constraints)
    objective: dict[str, Any] = field(default_factory=dict)
    name: str = "tagger"


def tagger_config_dir() -> Path:
    """``tagger/`` of the parser's config tree (:func:`parser.config.config_dir`)."""
    path = config_dir() / "tagger"
    if not (path / "tagger.yaml").is_file():
        raise FileNotFoundError(f"tagger configs not found: {path / 'tagger.yaml'}")
    return path


def register_tagger_configs() -> None:
    """Store the schema (idempotent) and the ``repo_root`` resolver the fixture config uses."""
    ConfigStore.instance().store(name="tagger_base_config", node=TaggerRunConfig)
    if not OmegaConf.has_resolver("repo_root"):
        OmegaConf.register_new_resolver("repo_root", lambda: str(REPO_ROOT))
