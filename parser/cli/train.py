"""``parser-train`` (or ``python -m parser.cli.train``): the Hydra entry point of training, and
the shell the three trainers share (``parser-train``, ``parser-train-tagger``,
``parser-train-tokenizer``: one loop, :mod:`parser.train.loop`, with a task each).

Configs come from the repository's ``configs/`` (or ``$PARSER_CONFIG_DIR``); every option is a
Hydra override, e.g. ``parser-train experiment=quickstart trainer.max_steps=100``. Outputs go to
the Hydra run directory: ``checkpoints/`` (``best.pt``, the last ``step-N.pt``), ``tb/``
(TensorBoard), ``{dev,test}.pred.conllu`` and their ``.metrics.json``. A run ends by printing
the folder it wrote and the checkpoint to pass on.

Exit status: 0 done; 2 bad input (the message says which option or file); 1 a run that stopped
(non-finite steps, a checkpoint that could not be written: the message names the file and the
last good checkpoint); 75 (EX_TEMPFAIL) a run stopped by a preemption signal
(``trainer.preempt_signals``, default SIGTERM and SIGUSR1) after saving a checkpoint: the same
command plus ``trainer.resume=last`` continues it, as an uninterrupted run would have gone on.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from parser.cli.shell import USER_ERRORS, run_hydra_cli
from parser.config import check_known_keys, config_dir, register_configs
from parser.runtime.errors import RunStopped
from parser.runtime.user_files import output_dir
from parser.train.run import run_training
from parser.train.task import TaskBuilder
from parser.train.tasks.parser_task import ParserTask

__all__ = ["main", "train", "training_main"]

log = logging.getLogger("parser.train")


def train(cfg: DictConfig, *, run_dir: str | Path, on_ready: Callable[[], None] = lambda: None
          ) -> dict:
    """Train the parser with ``cfg``, then score the best checkpoint on dev and test. Returns
    ``{"dev": report, "test": report, "state": ..., "run_dir": ..., "checkpoint": ...}``
    (reports from ``parser.eval.report``; see :func:`parser.train.run.run_training`)."""
    return run_training(cfg, run_dir=run_dir, task=ParserTask, on_ready=on_ready)


def training_main(argv: Sequence[str] | None, *, task: TaskBuilder, prog: str, module: str,
                  config_dir: str | os.PathLike, config_name: str) -> int:
    """The console script of a trainer: Hydra parses ``argv`` (default ``sys.argv[1:]``:
    overrides, ``--multirun``, ``--cfg job``). Returns the exit status: 0; 2 on bad input (a
    config that does not compose, a missing, misplaced or malformed file, an unknown treebank),
    with ``<prog>: error: <message>`` on stderr and no traceback; 1 when training stopped (on
    non-finite steps, or a checkpoint it could not write); 75 when a preemption signal stopped it
    with a checkpoint to resume from (see the module docstring and
    :func:`parser.cli.shell.run_hydra_cli`). The run folder is this run's
    alone while it runs: a second run into it is refused before it writes anything
    (:mod:`parser.cli.run_folder`). ``module``: the entry point's module, after which Hydra names the
    job and its log file (``train.log``, ``train_tagger.log``, ...), also under ``python -m``."""

    def hydra_main(cfg: DictConfig, *, record: Callable[[], None]) -> None:
        check_known_keys(cfg)  # Hydra's ``+`` forces unknown keys into the typed config
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        try:
            results = run_training(cfg, run_dir=run_dir, task=task, on_ready=record)
        except (RunStopped, *USER_ERRORS) as error:
            log.error("%s", error)  # into the run's log file too
            raise
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"run folder: {results['run_dir']}\ncheckpoint: {results['checkpoint']}", flush=True)

    hydra_main.__module__ = module
    return run_hydra_cli(hydra_main, argv, prog=prog, config_dir=config_dir,
                         config_name=config_name, failures=(RunStopped,), own_run_dir=True,
                         folders=_checkpoint_folder, record_in_task=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``parser-train``: see :func:`training_main`."""
    register_configs()
    return training_main(argv, task=ParserTask, prog="parser-train", module="parser.cli.train",
                         config_dir=config_dir(), config_name="config")


def _checkpoint_folder(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """``trainer.checkpoint_dir`` when set: locked with the run folder, for a run writes there."""
    directory = cfg.trainer.checkpoint_dir
    return [output_dir(directory, option="trainer.checkpoint_dir")] if directory else []


if __name__ == "__main__":
    sys.exit(main())
