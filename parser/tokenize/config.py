"""Typed schema of the tokenizer's Hydra config tree (``configs/tokenizer/``).

``configs/tokenizer/tokenizer.yaml`` starts its defaults with ``tokenizer_base_config``
(:class:`TokenizerRunConfig`), so a misspelt key or a wrong type fails when the config is composed.
The ``trainer``, ``logger`` and ``optim`` nodes are the parser's (:class:`~parser.config.TrainerConfig`,
...: one training loop, ``parser.train``), composed from the shared groups of ``configs/``
(tokenizer.yaml adds them to Hydra's search path); ``data`` and ``model`` are the tokenizer's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from parser.config import LoggerConfig, OptimConfig, TrainerConfig, config_dir

__all__ = ["TokDataConfig", "TokModelConfig", "TokenizerRunConfig",
           "register_tokenizer_configs", "tokenizer_config_dir"]

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TokDataConfig:
    """Treebank files (``<root>/<treebank>/<treebank>-ud-<split>.conllu`` unless a ``*_file`` is
    set; ``root`` null: ``$UD_ROOT``, then ``<repo>/data/ud``). The tokenizer learns from the
    ``train`` file's text and multiword tokens (``train_split: dev`` for a treebank without one)."""

    treebank: str = "en_ewt"
    root: str | None = None
    train_split: str = "train"
    dev_split: str | None = "dev"  # null: no dev evaluation, the last step's model is kept
    train_file: str | None = None
    dev_file: str | None = None
    segment: int = 200  # training pieces of at most this many characters, cut at spaces
    batch_size: int = 32  # pieces per step
    min_freq: int = 2  # rarer characters read as UNK (their class still tells)


@dataclass
class TokModelConfig:
    char_dim: int = 32
    class_dim: int = 8
    hidden: int = 64
    layers: int = 1
    dropout: float = 0.2
    window: int = 500  # prediction windows of characters ...
    context: int = 100  # ... read with this many characters either side
    init: str | None = None  # start from this tokenizer checkpoint's weights (same characters, sizes)


@dataclass
class TokenizerRunConfig:
    data: TokDataConfig = field(default_factory=TokDataConfig)
    model: TokModelConfig = field(default_factory=TokModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    name: str = "tokenizer"


def tokenizer_config_dir() -> Path:
    """``tokenizer/`` of the parser's config tree (:func:`parser.config.config_dir`)."""
    path = config_dir() / "tokenizer"
    if not (path / "tokenizer.yaml").is_file():
        raise FileNotFoundError(f"tokenizer configs not found: {path / 'tokenizer.yaml'}")
    return path


def register_tokenizer_configs() -> None:
    """Store the schema (idempotent) and the ``repo_root`` resolver the fixture config uses."""
    ConfigStore.instance().store(name="tokenizer_base_config", node=TokenizerRunConfig)
    if not OmegaConf.has_resolver("repo_root"):
        OmegaConf.register_new_resolver("repo_root", lambda: str(REPO_ROOT))
