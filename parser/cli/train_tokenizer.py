"""``parser-train-tokenizer [overrides]`` (or ``python -m parser.cli.train_tokenizer``): train the
tokenizer and sentence splitter on a treebank's own text (Hydra, ``configs/tokenizer/``; the loop
is :mod:`parser.tokenize.train`).

Examples::

    parser-train-tokenizer data=en_ewt
    parser-train-tokenizer data=fr_gsd          # learns from fr_gsd dev (no train file here)
    parser-train-tokenizer data=tiny train.max_steps=50
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from parser.cli.shell import run_hydra_cli
from parser.tokenize.config import register_tokenizer_configs, tokenizer_config_dir
from parser.tokenize.train import train

__all__ = ["main"]


def _hydra_main(cfg: DictConfig) -> None:
    train(cfg, run_dir=Path(HydraConfig.get().runtime.output_dir))


def main(argv: Sequence[str] | None = None) -> int:
    """Hydra parses ``argv``; returns 0, or 2 on bad input with
    ``parser-train-tokenizer: error: <message>`` (the shell of ``parser-train``)."""
    register_tokenizer_configs()
    return run_hydra_cli(_hydra_main, argv, prog="parser-train-tokenizer",
                         config_dir=tokenizer_config_dir(), config_name="tokenizer")


if __name__ == "__main__":
    sys.exit(main())
