"""``parser-train-tagger [overrides]`` (or ``python -m parser.cli.train_tagger``): train the UPOS
tagger (Hydra, ``configs/tagger/`` with the shared ``trainer``, ``logger`` and ``optim`` groups;
the loop is :mod:`parser.train.loop`, the task :mod:`parser.train.tasks.tagger_task`).

Examples::

    parser-train-tagger data.treebank=en_ewt
    parser-train-tagger data=tiny trainer.max_epochs=2
    parser-train-tagger objective=semisup data.labeled_size=1000
    parser-train-tagger data=tiny hydra.run.dir=outputs/t trainer.resume=last   # after a kill
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from parser.cli.train import training_main
from parser.tagger.config import register_tagger_configs, tagger_config_dir
from parser.train.run import run_training
from parser.train.tasks.tagger_task import TaggerTask

__all__ = ["main", "train"]


def train(cfg: DictConfig, *, run_dir: str | Path) -> dict:
    """Train the tagger with ``cfg``; returns the dev and test UPOS accuracy of ``best.pt`` (also
    in ``<run_dir>/results.json``) with the run's ``state``, ``run_dir`` and ``checkpoint``."""
    return run_training(cfg, run_dir=run_dir, task=TaggerTask)


def main(argv: Sequence[str] | None = None) -> int:
    """The shell of ``parser-train`` (:func:`parser.cli.train.training_main`): the same exit
    statuses, run lock, resume and closing lines."""
    register_tagger_configs()
    return training_main(argv, task=TaggerTask,
                         prog="parser-train-tagger", module="parser.cli.train_tagger",
                         config_dir=tagger_config_dir(), config_name="tagger")


if __name__ == "__main__":
    sys.exit(main())
