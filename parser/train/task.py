"""What the training loop (:class:`parser.train.loop.Trainer`) asks of a task: the parser, the
UPOS tagger and the tokenizer are its three tasks (:mod:`parser.train.tasks`).

The loop owns everything a run shares: seeding, the run's checkpoint folder and resume, the
optimiser and schedule, the backward pass, the non-finite policy, dev evaluation cadence and early
stopping, ``best.pt`` and ``step-N.pt``, TensorBoard and the final evaluation's timing. A task
supplies what differs: its model, its batches, its loss on one batch, its dev score, what its
checkpoint must hold for its loader, and its final evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from omegaconf import DictConfig

from parser.objectives.base import Output
from parser.train.distributed import DistributedContext

__all__ = ["Batches", "DevScore", "FinalReport", "StepLoss", "Task", "TaskBuilder", "TaskContext",
           "check_same_sizes"]


class Batches(Protocol):
    """An endless stream of training batches whose position is part of the checkpoint."""

    @property
    def epoch(self) -> int:
        """Passes over the training data completed so far."""

    def next(self) -> Any: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class StepLoss:
    """A task's loss on one batch: the objective's ``output`` (scalar ``loss`` and detached
    ``logs``, written as ``train/<key>``), or None when the model's scores were not finite (the
    step is skipped and counted like a non-finite loss); the batch's ``kind`` (``labeled``,
    ``unlabeled``, ``text``) and size in ``sentences`` and ``tokens`` (for the speed scalars)."""

    output: Output | None
    kind: str
    sentences: int
    tokens: int
    model_output: Any = None  # for the task's own extra scalars (Task.step_scalars)


@dataclass(frozen=True)
class DevScore:
    """A dev evaluation: ``value`` decides ``best.pt`` and early stopping (``higher_is_better``
    says which way), ``scalars`` are written as ``dev/<key>``, ``summary`` goes to the log."""

    value: float
    scalars: dict[str, float]
    summary: str
    higher_is_better: bool = True


@dataclass(frozen=True)
class FinalReport:
    """The final evaluation of the best checkpoint: ``results`` returned to the caller (and
    whatever files the task writes), ``metrics`` given to TensorBoard's hparams plugin."""

    results: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskContext:
    """What a task is built with: the composed config, where it runs, and the checkpoint being
    resumed (None: a fresh run), whose vocabularies a task reuses instead of rebuilding them."""

    cfg: DictConfig
    dist: DistributedContext
    resumed: dict[str, Any] | None

    @property
    def device(self) -> torch.device:
        return self.dist.device


class Task(Protocol):
    """One kind of model the loop trains (see the module docstring)."""

    model: torch.nn.Module
    batches: Batches

    def loss(self, batch: Any, *, step: int) -> StepLoss:
        """The loss of ``batch`` (one item of ``batches``) at optimiser step ``step``."""

    def step_scalars(self, loss: StepLoss) -> dict[str, float]:
        """Extra ``train/...`` scalars of a logged step (the parser: arc entropy); {} for none."""

    def dev_score(self) -> DevScore | None:
        """The current model's dev score, None without a dev set (the latest model is best)."""

    def state_dict(self) -> dict[str, Any]:
        """Top-level checkpoint entries besides the loop's: what the task's loader reads (kind,
        model sizes, vocabularies) and the task's mutable state (the GE expectations)."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Check that a checkpoint to resume fits this run's model; restore the task's state."""

    def final_evaluation(self, *, best_path: Path, run_dir: Path) -> FinalReport:
        """Score ``best_path`` on dev and test, print the figures, write the task's files."""


# A task class (or any callable) built from the run's context.
TaskBuilder = Callable[[TaskContext], Task]


def check_same_sizes(saved: Any, current: dict[str, Any], *, model: str, options: str) -> None:
    """Refuse to resume a checkpoint whose model sizes (``hparams``) are not this run's: its
    weights would not fit. ``model`` names the model, ``options`` the options that set its sizes."""
    if saved != current:
        raise ValueError(f"trainer.resume: the checkpoint's {model} sizes {saved} differ from this "
                         f"run's {current}; resume with the same {options} options")
