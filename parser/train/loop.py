"""The training loop, one for every task (:mod:`parser.train.task`: the parser, the UPOS tagger,
the tokenizer).

One step: the task's next batch -> ``task.loss(batch, step=step)`` -> backward -> clip ->
optimiser and schedule step. This is the only place in ``parser`` that runs ``.backward()``. A
step whose loss or gradient norm is not finite (or whose model scores are not: the task returns
no output) is skipped (no update) and counted; ``trainer.max_nonfinite`` of them in a row stop the
run. Every ``trainer.eval_every`` steps the task scores the dev set; a better score writes
``best.pt``, and ``trainer.patience`` evaluations without gain stop training. A periodic
checkpoint ``step-N.pt`` follows each evaluation (the newest ``trainer.keep_last`` are kept): model,
optimiser, schedule, step, batch stream position, RNG states, early-stopping state, resolved config
and the task's own entries (its loader's: kind, sizes, vocabularies; its state: GE corpus
expectations), so that ``trainer.resume`` continues exactly. Checkpoints form one consistent set
(:mod:`parser.runtime.checkpoint`: a crash leaves the old set or the new one). A preemption
signal (``trainer.preempt_signals``, :mod:`parser.train.preemption`) stops the run after the step
under way, with a checkpoint of that step (:class:`~parser.runtime.errors.Preempted`); under DDP
every rank stops at the same step.
"""

from __future__ import annotations

import logging
import math
import random
import time
from contextlib import closing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from parser.runtime.checkpoint import CheckpointManager, capture_rng, restore_rng
from parser.runtime.errors import NonFiniteError, Preempted
from parser.runtime.optim import build_optimizer, build_scheduler
from parser.train.averaging import build_average, restore_average, swapped_in
from parser.train.distributed import init_distributed
from parser.train.preemption import PreemptionSignals, parse_signals
from parser.train.rank_messages import CHECKPOINT, PATH, json_codec
from parser.train.resume import resolve_resume
from parser.train.task import DevScore, StepLoss, Task, TaskBuilder, TaskContext
from parser.train.tasks.parser_task import ParserTask
from parser.train.tensorboard import RunLogger

__all__ = ["NonFiniteError", "TrainState", "Trainer", "all_finite"]

log = logging.getLogger(__name__)


@dataclass
class TrainState:
    step: int = 0
    best_score: float = -math.inf  # in the task's "higher is better" direction (DevScore)
    best_step: int = -1
    evals_without_gain: int = 0
    nonfinite_in_row: int = 0
    nonfinite_total: int = 0
    stopped_early: bool = False


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """Builds everything a run needs from the composed config and trains ``task`` (the parser by
    default) with it.

    ``cfg``: the root config, with the shared ``trainer``, ``logger`` and ``optim`` nodes
    (``parser.config``) beside the task's own; ``run_dir``: the directory for checkpoints,
    TensorBoard events and the task's final outputs.
    """

    def __init__(self, cfg: DictConfig, *, run_dir: str | Path, task: TaskBuilder = ParserTask) -> None:
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        trainer = cfg.trainer
        # torchrun: one rank of a DDP run (parser.train.distributed); else one process.
        self.dist = init_distributed(trainer.distributed, device=trainer.device)
        self.device = self.dist.device
        if trainer.num_threads is not None:  # on a shared CPU, fewer threads spin less
            torch.set_num_threads(trainer.num_threads)
        if trainer.deterministic:
            torch.use_deterministic_algorithms(True)
        seed_everything(trainer.seed)
        if trainer.max_nonfinite < 0:
            raise ValueError(f"trainer.max_nonfinite={trainer.max_nonfinite}: must be >= 0")
        if trainer.max_steps < 1:
            raise ValueError(f"trainer.max_steps={trainer.max_steps}: must be >= 1")
        if trainer.eval_every < 1:
            raise ValueError(f"trainer.eval_every={trainer.eval_every}: must be >= 1")
        if trainer.max_minutes is not None and trainer.max_minutes < 0:
            raise ValueError(f"trainer.max_minutes={trainer.max_minutes}: must be >= 0 (or null)")
        self.preempt_signals = parse_signals(trainer.preempt_signals, option="trainer.preempt_signals")
        checkpoint_dir = Path(trainer.checkpoint_dir) if trainer.checkpoint_dir else self.run_dir / "checkpoints"
        self.checkpoints = CheckpointManager(checkpoint_dir, keep_last=trainer.keep_last)
        # (null trainer.checkpoint_dir: <run dir>/checkpoints; errors show the folder used)
        self.dist.on_main(lambda: self.checkpoints.prepare(
            option="trainer.checkpoint_dir", resuming=bool(trainer.resume)
        ))
        resumed = self.dist.on_main(
            lambda: resolve_resume(trainer.resume, checkpoints=self.checkpoints,
                                   config=OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)),
            send=CHECKPOINT,
        )
        self.task: Task = task(TaskContext(cfg=cfg, dist=self.dist, resumed=resumed))
        self.model = self.task.model
        self.optimizer = build_optimizer(self.model.parameters(), cfg.optim)
        # Averaged weights for evaluation and checkpoints (optim.average); None: the raw ones.
        self.average = build_average(self.model, kind=cfg.optim.average, decay=cfg.optim.ema_decay)
        self.scheduler = build_scheduler(self.optimizer, cfg.optim, total_steps=trainer.max_steps)
        self.state = TrainState()
        self._saved_step = -1  # the step of the newest checkpoint this process wrote
        self.dist.reseed(trainer.seed)
        if resumed:
            self._restore(resumed)
        # last: a constructor that raises leaves no writer open (run_training closes this one)
        self.logger = RunLogger(
            self.run_dir / cfg.logger.log_dir if cfg.logger.tensorboard and self.dist.is_main else None,
            flush_secs=cfg.logger.flush_secs,
        )

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            **self.task.state_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "stream": self.task.batches.state_dict(),
            "trainer": asdict(self.state),
            "epoch": self.task.batches.epoch,
            "rng": capture_rng(),
            "config": OmegaConf.to_container(self.cfg, resolve=True, enum_to_str=True),
            "average": None if self.average is None else self.average.state_dict(),
        }

    def _restore(self, state: dict[str, Any]) -> None:
        self.task.load_state_dict(state)  # first: a checkpoint of another model is refused by name
        self.model.load_state_dict(state["model"])
        restore_average(self.average, state.get("average"))  # raw weights back into the model
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.task.batches.load_state_dict(state["stream"])
        self.state = TrainState(**state["trainer"])
        ranks = state.get("rng_ranks")
        own = self.dist.enabled and ranks is not None and len(ranks) == self.dist.world_size
        restore_rng(ranks[self.dist.rank] if own else state["rng"])
        log.info("resumed at step %d (epoch %d)", self.state.step, state["epoch"])

    def save(self, *, best: bool = False, dev: DevScore | None = None) -> Path | None:
        """Rank 0 writes (with every rank's RNG state when distributed); the others wait, and a
        failed write (:class:`~parser.runtime.errors.CheckpointWriteError`) stops them all. ``dev``:
        the scores of the weights saved (``"dev"`` in the file, beside ``"step"``, for model cards)."""
        rng_ranks = self.dist.gather_rng() if self.dist.enabled else None

        def write() -> Path:
            state = {**self.state_dict(), "step": self.state.step,
                     "dev": None if dev is None else dict(dev.scalars)}
            if rng_ranks is not None:
                state["rng_ranks"] = rng_ranks
            return self.checkpoints.save(state, step=self.state.step, best=best)

        path = self.dist.on_main(write, send=PATH)  # a failed write (a full disk) stops every rank
        self._saved_step = self.state.step
        return path

    # -- training -------------------------------------------------------------------------------

    def fit(self) -> TrainState:
        """Train until ``max_steps``, ``max_epochs``, ``max_minutes`` or early stopping; returns
        the final state."""
        trainer = self.cfg.trainer
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = float(self.cfg.optim.clip_norm)
        window = {"time": time.perf_counter(), "sentences": 0, "tokens": 0}
        self._started, self._start_step = time.monotonic(), self.state.step
        self.model.train()
        # disable=None: no bar where stderr is not a terminal (a log file of a sweep or a cluster job)
        shown = trainer.progress and self.dist.is_main
        bar = tqdm(total=trainer.max_steps, initial=self.state.step, disable=None if shown else True,
                   desc=str(self.cfg.get("name", "train")), dynamic_ncols=True, leave=False)
        with PreemptionSignals(self.preempt_signals) as preemption, closing(bar):
            while not self._should_stop():
                step = self.state.step
                batch_loss = self._loss(self.task.batches.next(), step=step)
                result = batch_loss.output
                loss = result.loss if result is not None else torch.tensor(math.nan)
                grad_norm = None
                if self.dist.all_finite(loss):  # every rank agrees, or DDP would wait
                    loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(
                        params, clip if clip > 0 else math.inf
                    )
                if grad_norm is None or not torch.isfinite(grad_norm):
                    self.optimizer.zero_grad(set_to_none=True)
                    self._count_nonfinite(batch_loss.kind, float(loss.detach()))
                else:
                    self.optimizer.step()
                    self._check_parameters(params)
                    if self.average is not None:
                        self.average.update()
                    self.scheduler.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    self.state.nonfinite_in_row = 0
                self.state.step += 1
                window["sentences"] += batch_loss.sentences
                window["tokens"] += batch_loss.tokens
                if self.state.step % trainer.log_every == 0 and result is not None:
                    speed = self._log_step(batch_loss, grad_norm, window)
                    bar.set_postfix(loss=f"{float(loss.detach()):.4f}", sent_s=f"{speed:.0f}", refresh=False)
                bar.update(1)
                if self.state.step % trainer.eval_every == 0:
                    self.evaluate_and_checkpoint()
                self._stop_if_preempted(preemption)
            if self.state.step % trainer.eval_every != 0:
                self.evaluate_and_checkpoint()
            self._stop_if_preempted(preemption)
        return self.state

    def _stop_if_preempted(self, preemption: PreemptionSignals) -> None:
        """At a step boundary: when a preemption signal came (to any rank: every rank stops at
        this step), save this step's checkpoint unless it was just saved, and stop."""
        received = preemption.received
        if self.dist.enabled:  # one all-reduce of a flag per step
            stop = self.dist.sum_scalars({"preempt": float(received is not None)})["preempt"] > 0
        else:
            stop = received is not None
        if not stop:
            return
        name = received.name if received is not None else "a preemption signal (on another rank)"
        log.warning("%s received: stopping after step %d with a checkpoint", name, self.state.step)
        if self._saved_step != self.state.step:
            with swapped_in(self.average):  # as every checkpoint: the average in "model"
                self.save()
        raise Preempted(
            f"{name} received: training stopped after step {self.state.step}; "
            f"{self.checkpoints.describe_saved()}; continue with the same command plus "
            "trainer.resume=last (exit status 75: resumable)"
        )

    def _loss(self, batch: Any, *, step: int) -> StepLoss:
        """The task's loss; a task that must stop on non-finite scores (a distributed run cannot
        skip a step alone) is told where the last good checkpoints are."""
        try:
            return self.task.loss(batch, step=step)
        except NonFiniteError as error:
            raise NonFiniteError(f"{error}; {self.checkpoints.describe_saved()}") from error

    def _should_stop(self) -> bool:
        trainer = self.cfg.trainer
        if self.state.stopped_early or self.state.step >= trainer.max_steps:
            return True
        checks_clock = self.state.step % trainer.log_every == 0 and self.state.step > self._start_step
        if trainer.max_minutes is not None and checks_clock:
            # rank 0's clock decides for all ranks, or DDP would wait on the ones that stopped
            elapsed = (time.monotonic() - self._started) / 60
            if self.dist.broadcast_flag(elapsed >= trainer.max_minutes):
                log.info("trainer.max_minutes=%s reached at step %d", trainer.max_minutes,
                         self.state.step)
                return True
        return trainer.max_epochs is not None and self.task.batches.epoch >= trainer.max_epochs

    def _count_nonfinite(self, kind: str, loss: float) -> None:
        self.state.nonfinite_in_row += 1
        self.state.nonfinite_total += 1
        log.warning("step %d (%s batch): non-finite scores, loss or gradient (loss %s): step skipped",
                    self.state.step, kind, loss)
        self.logger.scalars({"train/nonfinite_steps": self.state.nonfinite_total}, step=self.state.step)
        limit = self.cfg.trainer.max_nonfinite
        if self.state.nonfinite_in_row >= limit:
            raise NonFiniteError(
                f"training stopped at step {self.state.step}: {self.state.nonfinite_in_row} steps "
                f"in a row had non-finite scores, loss or gradient (trainer.max_nonfinite={limit}); "
                f"{self.checkpoints.describe_saved()}"
            )

    def _check_parameters(self, params: list[torch.Tensor]) -> None:
        """A finite gradient can still make an update overflow (a huge learning rate): every
        later step would be non-finite, so stop now, before a checkpoint keeps such weights."""
        if all_finite(params):
            return
        names = [name for name, p in self.model.named_parameters() if not torch.isfinite(p).all()]
        raise NonFiniteError(
            f"training stopped at step {self.state.step + 1}: the update left non-finite parameters "
            f"({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}); lower optim.lr "
            f"(now {self.optimizer.param_groups[0]['lr']:g}) or optim.clip_norm; "
            f"{self.checkpoints.describe_saved()}"
        )

    def _log_step(self, batch_loss: StepLoss, grad_norm, window: dict) -> float:
        now = time.perf_counter()
        elapsed = max(now - window["time"], 1e-9)
        # Summed and averaged over ranks (objective logs are scaled so their mean is global).
        counts = self.dist.sum_scalars({"sentences": window["sentences"], "tokens": window["tokens"]})
        speed = counts["sentences"] / elapsed
        logs = batch_loss.output.logs
        values = {f"train/{key}": value for key, value in self.dist.mean_scalars(logs).items()}
        values["train/lr"] = self.optimizer.param_groups[0]["lr"]
        values["train/sentences_per_s"] = speed
        values["train/tokens_per_s"] = counts["tokens"] / elapsed
        if grad_norm is not None:
            values["train/grad_norm"] = float(grad_norm)
        if self.logger.enabled:
            values.update(self.task.step_scalars(batch_loss))
        self.logger.scalars(values, step=self.state.step)
        window.update(time=time.perf_counter(), sentences=0, tokens=0)
        return speed

    # -- evaluation -----------------------------------------------------------------------------

    def evaluate_and_checkpoint(self) -> DevScore | None:
        """Dev score, early-stopping bookkeeping, ``best.pt`` on a gain, a periodic checkpoint;
        with ``optim.average`` all of it on the averaged weights (the raw ones saved beside)."""
        with swapped_in(self.average):
            return self._evaluate_and_checkpoint()

    def _evaluate_and_checkpoint(self) -> DevScore | None:
        score = self.dist.on_main(self._dev_score, send=json_codec(DevScore))  # rank 0 scores; all ranks get it
        self.model.train()
        gained = True  # no dev set: the latest model is the best one known
        if score is not None:
            self.logger.scalars({f"dev/{k}": v for k, v in score.scalars.items()}, step=self.state.step)
            value = score.value if score.higher_is_better else -score.value
            gained = value > self.state.best_score
            log.info("step %d: %s%s", self.state.step, score.summary, " (best)" if gained else "")
            if gained:
                self.state.best_score = value
                self.state.evals_without_gain = 0
            else:
                self.state.evals_without_gain += 1
                patience = self.cfg.trainer.patience
                if patience is not None and self.state.evals_without_gain >= patience:
                    self.state.stopped_early = True
                    log.info("early stopping at step %d: no dev gain in %d evaluations (best at "
                             "step %d)", self.state.step, patience, self.state.best_step)
        if gained:
            self.state.best_step = self.state.step
        self.save(best=gained, dev=score)
        return score

    def _dev_score(self) -> DevScore | None:
        self.model.eval()
        return self.task.dev_score()


@torch.no_grad()
def all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every element of ``tensors`` is finite, with one host sync. (finite * 0 = 0, inf * 0
    = NaN * 0 = NaN: one sum per tensor is exact, cannot overflow, and costs a third of
    ``isfinite(t).all()``, which writes a bool copy and then reduces it; checked every step.)"""
    return bool(torch.isfinite(torch.stack([t.mul(0).sum() for t in tensors])).all()) if tensors else True
