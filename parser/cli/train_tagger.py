"""``parser-train-tagger [overrides]`` (or ``python -m parser.cli.train_tagger``): train the UPOS
tagger (Hydra, ``configs/tagger/``; the loop is :mod:`parser.tagger.train`).

Examples::

    parser-train-tagger data.treebank=en_ewt
    parser-train-tagger data=tiny tagger.max_epochs=2
    parser-train-tagger objective=semisup data.labeled_size=1000
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from parser.cli.shell import run_hydra_cli
from parser.tagger.config import register_tagger_configs, tagger_config_dir
from parser.tagger.train import train

__all__ = ["main"]


def _hydra_main(cfg: DictConfig) -> None:
    train(cfg, run_dir=Path(HydraConfig.get().runtime.output_dir))


def main(argv: Sequence[str] | None = None) -> int:
    """Hydra parses ``argv`` (default ``sys.argv[1:]``: overrides, ``--multirun``, ``--cfg job``).
    Returns the exit status: 0, or 2 on bad input (a config that does not compose, a missing or
    malformed file) with ``parser-train-tagger: error: <message>`` and no traceback: the same
    shell as ``parser-train`` (:func:`parser.cli.shell.run_hydra_cli`)."""
    register_tagger_configs()
    return run_hydra_cli(_hydra_main, argv, prog="parser-train-tagger",
                         config_dir=tagger_config_dir(), config_name="tagger", own_run_dir=True)


if __name__ == "__main__":
    sys.exit(main())
