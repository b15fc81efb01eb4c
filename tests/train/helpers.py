"""Composing the real Hydra configs with a tiny model on the fixtures, for fast trainer tests."""

from __future__ import annotations

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from parser.config import config_dir, register_configs

# Gold UPOS input, as most tests were written for (the model group's default tags its own words:
# tests/test_train_pipeline.py trains that default; a test wanting it overrides these two keys).
TINY_MODEL = [
    "model.word_dim=16", "model.char_dim=8", "model.char_hidden=16", "model.upos_dim=8",
    "model.lstm_hidden=16", "model.lstm_layers=1", "model.arc_mlp=16", "model.rel_mlp=8",
    "model.upos_input=gold", "model.tag_loss_weight=0",
]
QUIET = ["trainer.progress=false", "logger.tensorboard=false"]
# The fixtures with no experiment (the schema's defaults, which these tests were written for, not
# the default experiment's), for a command line; tiny_config adds it unless an experiment is named.
TINY_DATA = ["~experiment", "data=tiny"]


def tiny_config(*overrides: str, quiet: bool = True) -> DictConfig:
    """``data=tiny`` with a tiny biaffine model, plus ``overrides``; no experiment unless one is
    named (the schema's defaults, which these tests were written for, not ``fast_cpu``'s)."""
    register_configs()
    named = any(o.startswith("experiment=") for o in overrides)
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(
            "config", overrides=[*(["data=tiny"] if named else TINY_DATA), *TINY_MODEL,
                                 *(QUIET if quiet else []), *overrides]
        )


class Recorder:
    """Stands in for the TensorBoard logger of a ``Trainer``: keeps the scalars of each step."""

    enabled = True

    def __init__(self) -> None:
        self.values: dict[int, dict[str, float]] = {}

    def scalars(self, values, *, step: int) -> None:
        self.values.setdefault(step, {}).update({k: float(v) for k, v in values.items()})

    def hparams(self, *args) -> None:
        pass

    def close(self) -> None:
        pass
