"""``parser-train-tokenizer [overrides]`` (or ``python -m parser.cli.train_tokenizer``): train the
tokenizer and sentence splitter on a treebank's own text (Hydra, ``configs/tokenizer/`` with the
shared ``trainer``, ``logger`` and ``optim`` groups; the loop is :mod:`parser.train.loop`, the task
:mod:`parser.train.tasks.tokenizer_task`).

Examples::

    parser-train-tokenizer data=en_ewt
    parser-train-tokenizer data=fr_gsd          # learns from fr_gsd dev (no train file here)
    parser-train-tokenizer data=tiny trainer.max_steps=50
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from parser.cli.train import training_main
from parser.tokenize.config import register_tokenizer_configs, tokenizer_config_dir
from parser.train.run import run_training
from parser.train.tasks.tokenizer_task import TokenizerTask

__all__ = ["main", "train"]


def train(cfg: DictConfig, *, run_dir: str | Path) -> dict:
    """Train the tokenizer with ``cfg``; returns the dev scores of ``best.pt`` (also in
    ``<run_dir>/results.json``) with the run's ``state``, ``run_dir`` and ``checkpoint``."""
    return run_training(cfg, run_dir=run_dir, task=TokenizerTask)


def main(argv: Sequence[str] | None = None) -> int:
    """The shell of ``parser-train`` (:func:`parser.cli.train.training_main`): the same exit
    statuses, run lock, resume and closing lines."""
    register_tokenizer_configs()
    return training_main(argv, task=TokenizerTask,
                         prog="parser-train-tokenizer", module="parser.cli.train_tokenizer",
                         config_dir=tokenizer_config_dir(), config_name="tokenizer")


if __name__ == "__main__":
    sys.exit(main())
