"""``parser-train`` (or ``python -m parser.cli.train``): the Hydra entry point of training.

Configs come from the repository's ``configs/`` (or ``$PARSER_CONFIG_DIR``); every option is a
Hydra override, e.g. ``parser-train experiment=quickstart trainer.max_steps=100``. Outputs go to
the Hydra run directory: ``checkpoints/``, ``tb/`` (TensorBoard), ``{dev,test}.pred.conllu`` and
their ``.metrics.json``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from parser.cli.shell import USER_ERRORS, run_hydra_cli
from parser.config import check_known_keys, config_dir, register_configs
from parser.runtime.errors import NonFiniteError
from parser.runtime.user_files import output_dir
from parser.train.final import evaluate_split, format_scores, restore_best
from parser.train.loop import Trainer
from parser.train.tensorboard import flatten_hparams

__all__ = ["main", "train"]

log = logging.getLogger("parser.train")


def train(cfg: DictConfig, *, run_dir: str | Path, on_ready: Callable[[], None] = lambda: None
          ) -> dict:
    """Train with ``cfg``, then score the best checkpoint on dev and test. Returns
    ``{"dev": report, "test": report, "state": ...}`` (reports from ``parser.eval.report``).
    ``on_ready()`` is called once the trainer is built (the checkpoint folder accepted, the
    resumed checkpoint chosen): the CLI writes the run's ``.hydra`` record then."""
    run_dir = Path(run_dir)
    trainer = Trainer(cfg, run_dir=run_dir)
    on_ready()
    state = trainer.fit()
    results: dict = {"state": state}
    metrics: dict[str, float | None] = {}
    if cfg.trainer.final_eval and trainer.dist.is_main:  # distributed: rank 0 alone
        restore_best(trainer.model, trainer.checkpoints.best_path)
        for name, treebank in (("dev", trainer.data.dev), ("test", trainer.data.test)):
            if treebank is None:
                continue
            report = evaluate_split(
                trainer.model, treebank, trainer.vocabs, name=name, out_dir=run_dir,
                tokens_per_batch=cfg.data.eval_tokens_per_batch, device=trainer.device,
            )
            results[name] = report
            print(format_scores(name, report), flush=True)
            official = report.get("official") or {}
            metrics[f"{name}/uas"] = official.get("UAS", report.get("uas"))
            metrics[f"{name}/las"] = official.get("LAS", report.get("las"))
    metrics["best_step"] = state.best_step
    trainer.logger.hparams(
        flatten_hparams(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)), metrics
    )
    trainer.logger.close()
    trainer.dist.shutdown()
    return results


def _hydra_main(cfg: DictConfig, *, record: Callable[[], None]) -> None:
    check_known_keys(cfg)  # Hydra's ``+`` forces unknown keys into the typed config
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        train(cfg, run_dir=run_dir, on_ready=record)
    except (NonFiniteError, *USER_ERRORS) as error:
        log.error("%s", error)  # into the run's log file too
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Console script: Hydra parses ``argv`` (default ``sys.argv[1:]``: overrides,
    ``--multirun``, ``--cfg job``). Returns the exit status: 0; 2 on bad input (a config that
    does not compose, a missing, misplaced or malformed file, an unknown treebank), with
    ``parser-train: error: <message>`` on stderr and no traceback; 1 when training stopped on
    non-finite steps (see :func:`parser.cli.shell.run_hydra_cli`). The run folder is this run's
    alone while it runs: a second run into it is refused before it writes anything
    (:mod:`parser.cli.run_folder`)."""
    register_configs()
    return run_hydra_cli(_hydra_main, argv, prog="parser-train", config_dir=config_dir(),
                         config_name="config", failures=(NonFiniteError,), own_run_dir=True,
                         folders=_checkpoint_folder, record_in_task=True)


def _checkpoint_folder(cfg: DictConfig, run_dir: Path) -> list[Path]:
    """``trainer.checkpoint_dir`` when set: locked with the run folder, for a run writes there."""
    directory = cfg.trainer.checkpoint_dir
    return [output_dir(directory, option="trainer.checkpoint_dir")] if directory else []


if __name__ == "__main__":
    sys.exit(main())
