"""The training loop: a composed objective over labeled and unlabeled batches.

One step: next ``(kind, batch)`` of the stream -> ``model(batch)`` -> ``objective(out, batch,
step=step)`` -> backward -> clip -> optimiser and schedule step. A step whose loss or gradient
norm is not finite is skipped (no update) and counted; ``trainer.max_nonfinite`` of them in a row
stop the run. Every ``trainer.eval_every`` steps the dev set is parsed (maximum spanning trees)
and scored; a better dev LAS (UAS without labeled training trees: nothing learns relations)
writes ``best.pt``, and ``trainer.patience`` evaluations without gain stop training. A stream of
batches that no objective term reads is not drawn. A periodic checkpoint follows each
evaluation: model, optimiser, schedule, step, epoch, stream position, RNG states, early-stopping
state, the objective's state (GE corpus expectations), resolved config and vocabularies, so that
``trainer.resume`` continues exactly.
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from parser.data.vocab import Vocabularies
from parser.inference import log_unknown_words, parse
from parser.models.parser_model import ParserModel, build_parser
from parser.runtime.checkpoint import CheckpointManager, capture_rng, restore_rng
from parser.runtime.errors import NonFiniteError
from parser.runtime.optim import build_optimizer, build_scheduler
from parser.train.averaging import build_average, restore_average, swapped_in
from parser.train.distributed import init_distributed
from parser.train.objective import build_training_objective
from parser.train.resume import resolve_resume
from parser.train.tensorboard import RunLogger
from parser.train.training_data import TrainingData, load_training_data

__all__ = ["NonFiniteError", "TrainState", "Trainer", "all_finite"]

log = logging.getLogger(__name__)


@dataclass
class TrainState:
    step: int = 0
    best_score: float = -math.inf
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
    """Builds everything a run needs from the composed config and trains it.

    ``cfg``: the root config (a ``DictConfig`` over ``parser.config.Config``); ``run_dir``: the
    directory for checkpoints, TensorBoard events, predictions and metrics.
    """

    def __init__(self, cfg: DictConfig, *, run_dir: str | Path) -> None:
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
        checkpoint_dir = Path(trainer.checkpoint_dir) if trainer.checkpoint_dir else self.run_dir / "checkpoints"
        self.checkpoints = CheckpointManager(checkpoint_dir, keep_last=trainer.keep_last)
        # (null trainer.checkpoint_dir: <run dir>/checkpoints; errors show the folder used)
        self.dist.on_main(lambda: self.checkpoints.prepare(
            option="trainer.checkpoint_dir", resuming=bool(trainer.resume)
        ))
        resumed = self.dist.on_main(
            lambda: resolve_resume(trainer.resume, checkpoints=self.checkpoints,
                                   config=OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
        )

        vocabs = Vocabularies.from_state_dict(resumed["vocabs"]) if resumed else None
        self.data: TrainingData = load_training_data(
            cfg.data, seed=trainer.seed, vocabs=vocabs, num_replicas=self.dist.world_size,
            rank=self.dist.rank, objective_terms=cfg.objective.terms,
            projective_trees=str(cfg.model.crf) == "projective",
        )
        self.vocabs = self.data.vocabs
        if self.dist.is_main:
            for split in (self.data.dev, self.data.test):
                if split is not None:
                    log_unknown_words(split.sentences, self.vocabs, name=split.path)
        self.model: ParserModel = build_parser(
            cfg.model, self.vocabs.sizes(), upos=self.vocabs.upos, chars=self.vocabs.chars, rels=self.vocabs.rels).to(self.device)
        objective = build_training_objective(
            cfg.objective.terms, vocabs=self.vocabs, labeled=self.data.labeled, device=self.device
        )
        for kind in self.data.stream.keep_only(objective.streams(), names=objective.names):
            log.info("no objective term reads %s batches: that stream is not drawn", kind)
        self.objective = self.dist.objective(objective)
        self.optimizer = build_optimizer(self.model.parameters(), cfg.optim)
        # Averaged weights for evaluation and checkpoints (optim.average); None: the raw ones.
        self.average = build_average(self.model, kind=cfg.optim.average, decay=cfg.optim.ema_decay)
        self.scheduler = build_scheduler(self.optimizer, cfg.optim, total_steps=trainer.max_steps)
        self.state = TrainState()
        if trainer.max_minutes is not None and trainer.max_minutes < 0:
            raise ValueError(f"trainer.max_minutes={trainer.max_minutes}: must be >= 0 (or null)")
        self.rel_universal = self.vocabs.rel_universal_ids()
        self.logger = RunLogger(
            self.run_dir / cfg.logger.log_dir if cfg.logger.tensorboard and self.dist.is_main else None,
            flush_secs=cfg.logger.flush_secs,
        )
        self.dist.reseed(trainer.seed)
        if resumed:
            self._restore(resumed)
        self.forward = self.dist.wrap(self.model)  # the model itself, or its DDP replica

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "stream": self.data.stream.state_dict(),
            "objective": self._objective_state(),  # e.g. corpus-level GE expectations
            "trainer": asdict(self.state),
            "epoch": self.data.stream.epoch,
            "rng": capture_rng(),
            "config": OmegaConf.to_container(self.cfg, resolve=True, enum_to_str=True),
            "vocabs": self.vocabs.state_dict(),
            "average": None if self.average is None else self.average.state_dict(),
        }

    def _objective_state(self) -> dict[str, Any]:
        """The objective's mutable state; {} for a plain callable (e.g. one a test wraps)."""
        state_dict = getattr(self.objective, "state_dict", None)
        return state_dict() if callable(state_dict) else {}

    def _restore(self, state: dict[str, Any]) -> None:
        saved_model = state["config"]["model"]
        current = OmegaConf.to_container(self.cfg.model, resolve=True, enum_to_str=True)
        if saved_model != current:
            raise ValueError(
                f"trainer.resume: the checkpoint's model config {saved_model} differs from this "
                f"run's {current}; resume with the same model options"
            )
        self.model.load_state_dict(state["model"])
        restore_average(self.average, state.get("average"))  # raw weights back into the model
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.data.stream.load_state_dict(state["stream"])
        # GE corpus expectations; a checkpoint of another objective (or an older one) leaves the
        # missing terms' state empty: said, since the run then does not continue exactly.
        missing, unexpected = self.objective.load_state_dict(state.get("objective", {}), strict=False)
        if missing or unexpected:
            log.warning("trainer.resume: objective state missing for terms %s, not used for terms "
                        "%s (another objective than the checkpoint's?): those start afresh",
                        missing, unexpected)
        self.state = TrainState(**state["trainer"])
        ranks = state.get("rng_ranks")
        own = self.dist.enabled and ranks is not None and len(ranks) == self.dist.world_size
        restore_rng(ranks[self.dist.rank] if own else state["rng"])
        log.info("resumed at step %d (epoch %d)", self.state.step, state["epoch"])

    def save(self, *, best: bool = False) -> Path | None:
        """Rank 0 writes (with every rank's RNG state when distributed); the others wait."""
        rng_ranks = self.dist.gather_object(capture_rng()) if self.dist.enabled else None
        path = None
        if self.dist.is_main:
            state = self.state_dict()
            if rng_ranks is not None:
                state["rng_ranks"] = rng_ranks
            path = self.checkpoints.save(state, step=self.state.step, best=best)
        self.dist.barrier()
        return path

    # -- training -------------------------------------------------------------------------------

    def fit(self) -> TrainState:
        """Train until ``max_steps``, ``max_epochs`` or early stopping; returns the final state."""
        trainer = self.cfg.trainer
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = float(self.cfg.optim.clip_norm)
        window = {"time": time.perf_counter(), "sentences": 0, "tokens": 0}
        self._started, self._start_step = time.monotonic(), self.state.step
        self.model.train()
        bar = tqdm(total=trainer.max_steps, initial=self.state.step, disable=not trainer.progress or not self.dist.is_main,
                   desc="train", dynamic_ncols=True, leave=False)
        try:
            while not self._should_stop():
                kind, batch = self.data.stream.next()
                batch = batch.to(self.device)
                step = self.state.step
                out = self._forward(batch, step=step)
                result = self.objective(out, batch, step=step) if out is not None else None
                loss = result.loss if result is not None else torch.tensor(math.nan)
                grad_norm = None
                if self.dist.all_finite(loss):  # every rank agrees, or DDP would wait
                    loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(
                        params, clip if clip > 0 else math.inf
                    )
                if grad_norm is None or not torch.isfinite(grad_norm):
                    self.optimizer.zero_grad(set_to_none=True)
                    self._count_nonfinite(kind, float(loss.detach()))
                else:
                    self.optimizer.step()
                    self._check_parameters(params)
                    if self.average is not None:
                        self.average.update()
                    self.scheduler.step()
                    self.optimizer.zero_grad(set_to_none=True)
                    self.state.nonfinite_in_row = 0
                self.state.step += 1
                window["sentences"] += batch.size
                window["tokens"] += batch.n_tokens
                if self.state.step % trainer.log_every == 0 and result is not None:
                    speed = self._log_step(out, result.logs, grad_norm, window, kind)
                    bar.set_postfix(loss=f"{float(loss.detach()):.4f}", sent_s=f"{speed:.0f}", refresh=False)
                bar.update(1)
                if self.state.step % trainer.eval_every == 0:
                    self.evaluate_and_checkpoint()
            if self.state.step % trainer.eval_every != 0:
                self.evaluate_and_checkpoint()
        finally:
            bar.close()
        return self.state

    def _should_stop(self) -> bool:
        trainer = self.cfg.trainer
        if self.state.stopped_early or self.state.step >= trainer.max_steps:
            return True
        checks_clock = self.state.step % trainer.log_every == 0 and self.state.step > self._start_step
        if trainer.max_minutes is not None and checks_clock:
            # rank 0's clock decides for all ranks, or DDP would wait on the ones that stopped
            elapsed = (time.monotonic() - self._started) / 60
            if self.dist.broadcast_object(elapsed >= trainer.max_minutes):
                log.info("trainer.max_minutes=%s reached at step %d", trainer.max_minutes,
                         self.state.step)
                return True
        return trainer.max_epochs is not None and self.data.stream.epoch >= trainer.max_epochs

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

    def _forward(self, batch, *, step: int):
        """``self.forward(batch)``, or None when the scorer's output is not finite (the tree CRF
        refuses such scores): a non-finite step, skipped and counted like a non-finite loss."""
        try:
            return self.forward(batch)
        except ValueError:
            with torch.no_grad():
                scores = self.model.scorer(batch)
            finite = torch.isfinite(scores.arcs).all() and (
                scores.labels is None or torch.isfinite(scores.labels).all()
            )
            if finite:
                raise
        if self.dist.enabled:  # the other ranks wait in collectives: no way to skip together
            raise NonFiniteError(
                f"training stopped at step {step} on rank {self.dist.rank}: the scorer gave NaN or "
                f"infinite scores; lower optim.lr; {self.checkpoints.describe_saved()}"
            )
        return None

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

    def _log_step(self, out, logs: dict, grad_norm, window: dict, kind: str) -> float:
        now = time.perf_counter()
        elapsed = max(now - window["time"], 1e-9)
        # Summed and averaged over ranks (objective logs are scaled so their mean is global).
        counts = self.dist.sum_scalars({"sentences": window["sentences"], "tokens": window["tokens"]})
        speed = counts["sentences"] / elapsed
        values = {f"train/{key}": value for key, value in self.dist.mean_scalars(logs).items()}
        values["train/lr"] = self.optimizer.param_groups[0]["lr"]
        values["train/sentences_per_s"] = speed
        values["train/tokens_per_s"] = counts["tokens"] / elapsed
        if grad_norm is not None:
            values["train/grad_norm"] = float(grad_norm)
        if self.cfg.logger.arc_entropy and self.logger.enabled:
            values[f"train/arc_entropy_{kind}"] = arc_entropy(out)
        self.logger.scalars(values, step=self.state.step)
        window.update(time=time.perf_counter(), sentences=0, tokens=0)
        return speed

    # -- evaluation -----------------------------------------------------------------------------

    def evaluate_and_checkpoint(self) -> dict | None:
        """Dev scores, early-stopping bookkeeping, ``best.pt`` on a gain, a periodic checkpoint;
        with ``optim.average`` all of it on the averaged weights (the raw ones saved beside)."""
        with swapped_in(self.average):
            return self._evaluate_and_checkpoint()

    def _evaluate_and_checkpoint(self) -> dict | None:
        scores = self.dist.on_main(self.evaluate_dev)  # rank 0 parses; all ranks get the scores
        gained = False
        if scores is not None:
            # LAS when relations are learned (labeled trees exist); else UAS (GE alone: LAS ~0).
            las = scores.get("las") if self.data.labeled else None
            score = las if las is not None else scores["uas"]
            self.logger.scalars({f"dev/{k}": v for k, v in scores.items()
                                 if k in ("uas", "las", "label_acc") and v is not None},
                                step=self.state.step)
            log.info("step %d: dev UAS %.2f LAS %s", self.state.step, scores["uas"],
                     "n/a" if scores.get("las") is None else f"{scores['las']:.2f}")
            if score > self.state.best_score:
                self.state.best_score, self.state.best_step = score, self.state.step
                self.state.evals_without_gain = 0
                gained = True
            else:
                self.state.evals_without_gain += 1
                patience = self.cfg.trainer.patience
                if patience is not None and self.state.evals_without_gain >= patience:
                    self.state.stopped_early = True
                    log.info("early stopping at step %d: no dev gain in %d evaluations (best %.2f "
                             "at step %d)", self.state.step, patience, self.state.best_score,
                             self.state.best_step)
        else:
            gained = True  # no dev set: the latest model is the best one known
            self.state.best_step = self.state.step
        self.save(best=gained)
        return scores

    def evaluate_dev(self) -> dict | None:
        if self.data.dev is None:
            return None
        predictions = parse(self.model, self.data.dev.sentences, self.vocabs,
                            tokens_per_batch=self.cfg.data.eval_tokens_per_batch, device=self.device)
        return predictions.scores


@torch.no_grad()
def all_finite(tensors: list[torch.Tensor]) -> bool:
    """Whether every element of ``tensors`` is finite, with one host sync. (finite * 0 = 0, inf * 0
    = NaN * 0 = NaN: one sum per tensor is exact, cannot overflow, and costs a third of
    ``isfinite(t).all()``, which writes a bool copy and then reduces it; checked every step.)"""
    return bool(torch.isfinite(torch.stack([t.mul(0).sum() for t in tensors])).all()) if tensors else True


@torch.no_grad()
def arc_entropy(out) -> float:
    """Mean entropy of the tree distribution per word of the batch (nats)."""
    dist = out.dist
    lengths = dist.lengths
    detached = type(dist)(dist.scores.detach(), lengths, single_root=dist.single_root)
    with torch.enable_grad():  # expectations may be computed as gradients
        entropy = detached.entropy()
    return float(entropy.sum()) / max(int(lengths.sum()), 1)
