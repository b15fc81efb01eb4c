"""A whole training run of any task: the loop (:class:`parser.train.loop.Trainer`), then the
task's final evaluation of ``best.pt`` (``trainer.final_eval``), the hyper-parameters and final
metrics to TensorBoard, and where the run wrote its outputs. The best checkpoint and its step
come from the checkpoint set (:meth:`parser.runtime.checkpoint.CheckpointManager.final_best`),
so the ``best_step`` reported is the step of the checkpoint scored."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from parser.train.loop import Trainer
from parser.train.task import TaskBuilder
from parser.train.tasks.parser_task import ParserTask
from parser.train.tensorboard import flatten_hparams

__all__ = ["run_training"]

log = logging.getLogger(__name__)


def run_training(cfg: DictConfig, *, run_dir: str | Path, task: TaskBuilder = ParserTask,
                 on_ready: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Train ``task`` with ``cfg`` into ``run_dir``, then score the best checkpoint. Returns the
    task's final results (for the parser ``{"dev": report, "test": report}``) with ``"state"``
    (the loop's :class:`~parser.train.loop.TrainState`), ``"run_dir"`` and ``"checkpoint"`` (the
    ``best.pt`` a user passes on). ``on_ready()`` is called once the trainer is built (the
    checkpoint folder accepted, the resumed checkpoint chosen): the CLI writes the run's
    ``.hydra`` record then."""
    run_dir = Path(run_dir)
    trainer = Trainer(cfg, run_dir=run_dir, task=task)
    with closing(trainer.logger):  # closed on every exit: success, non-finite loss, preemption, error
        on_ready()
        state = trainer.fit()
        results: dict[str, Any] = {}
        metrics: dict[str, float | None] = {}
        best_path, best_step = trainer.checkpoints.best_path, state.best_step
        if trainer.dist.is_main:  # distributed: rank 0 alone
            best_path, saved_step = trainer.checkpoints.final_best()
            if saved_step is not None and saved_step != best_step:
                log.warning("the best checkpoint is of step %d, the run's state says step %d: the "
                            "checkpoint's is reported", saved_step, best_step)
                best_step = saved_step
            if cfg.trainer.final_eval:
                report = trainer.task.final_evaluation(best_path=best_path, run_dir=run_dir)
                results.update(report.results)
                metrics.update(report.metrics)
        metrics["best_step"] = best_step
        trainer.logger.hparams(
            flatten_hparams(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)), metrics
        )
    trainer.dist.shutdown()
    return {**results, "state": state, "run_dir": run_dir, "checkpoint": best_path}
