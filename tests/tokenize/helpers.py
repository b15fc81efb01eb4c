"""A tiny tokenizer trained on the fixtures (about a minute of one CPU core at most)."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from parser.tokenize.config import register_tokenizer_configs, tokenizer_config_dir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TINY_TOKENIZER = [
    "data=tiny", "model.hidden=24", "model.char_dim=16", "model.dropout=0.0", "optim.lr=1e-2",
    "optim.warmup_steps=0", "trainer.progress=false", "logger.tensorboard=false",
]


def tokenizer_config(*overrides: str) -> DictConfig:
    register_tokenizer_configs()
    with initialize_config_dir(config_dir=str(tokenizer_config_dir()), version_base="1.3"):
        return compose("tokenizer", overrides=[*TINY_TOKENIZER, *overrides])
