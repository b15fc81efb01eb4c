"""The dependency parser as a task of the training loop: labeled and unlabeled treebank batches,
the composed objective (constraints and teacher loaded by :mod:`parser.train.objective`), dev
LAS (UAS without labeled training trees: nothing learns relations), and the final evaluation of
``best.pt`` on dev and test (CoNLL-U predictions and metrics in the run folder)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from parser.data.layers import UposColumn
from parser.data.paths import existing_file
from parser.data.vocab import Vocabularies
from parser.inference import log_unknown_words, parse
from parser.inference.loading import load_parser
from parser.models.parser_model import (
    ParserModel,
    build_parser,
    check_layer_inputs,
    layers_of,
    reads_own_tags,
)
from parser.runtime.errors import NonFiniteError
from parser.train.final import evaluate_split, format_scores, restore_best
from parser.train.objective import build_training_objective, load_teacher, taught_from_start
from parser.train.task import DevScore, FinalReport, StepLoss, TaskContext
from parser.train.training_data import TrainingData, load_training_data

__all__ = ["ParserTask", "arc_entropy"]

log = logging.getLogger(__name__)


class ParserTask:
    """``cfg.data``, ``cfg.model``, ``cfg.objective`` of a ``parser-train`` config."""

    def __init__(self, context: TaskContext) -> None:
        cfg, dist = context.cfg, context.dist
        check_layer_inputs(cfg.model)  # before any data is read
        self.cfg, self.dist, self.device = cfg, dist, context.device
        resumed = context.resumed
        start = _warm_start(cfg.model.init, device=self.device) if cfg.model.init and not resumed \
            else None
        # a new student reads with its teacher's vocabularies (the teacher is read once, here)
        teacher = None if resumed or start else load_teacher(cfg.objective.terms, device=self.device)
        vocabs = (Vocabularies.from_state_dict(resumed["vocabs"]) if resumed
                  else start[1] if start else _teacher_vocabularies(cfg, teacher))
        self.data: TrainingData = load_training_data(
            cfg.data, seed=cfg.trainer.seed, vocabs=vocabs, num_replicas=dist.world_size,
            rank=dist.rank, objective_terms=cfg.objective.terms,
            projective_trees=str(cfg.model.crf) == "projective", layers=layers_of(cfg.model),
            layer_max_classes=int(cfg.model.layer_max_classes),
            tag_dictionary=UposColumn() if reads_own_tags(cfg.model) else None,
            vectors=cfg.model.vectors,
        )
        self.vocabs = self.data.vocabs
        if dist.is_main:
            for split in (self.data.dev, self.data.test):
                if split is not None:
                    log_unknown_words(split.sentences, self.vocabs, name=split.path)
        self.model: ParserModel = build_parser(
            cfg.model, self.vocabs.sizes(), upos=self.vocabs.upos, chars=self.vocabs.chars,
            rels=self.vocabs.rels, layer_sizes=self.vocabs.layer_sizes(), layer_vocabs=self.vocabs.layers,
            vector_rows=None if self.data.vector_rows is None else torch.from_numpy(self.data.vector_rows),
        ).to(self.device)
        if start:
            try:
                self.model.load_state_dict(start[0].state_dict())
            except RuntimeError as error:
                raise ValueError(f"model.init={cfg.model.init}: its weights do not fit this run's "
                                 f"model options ({str(error).splitlines()[0]}); give the options it "
                                 f"was trained with") from None
            log.info("model.init: weights and vocabularies from %s", cfg.model.init)
            for name in taught_from_start(cfg.objective.terms, cfg.model.init):
                log.warning("objective.terms.%s.checkpoint is model.init: the student starts at its "
                            "teacher, whose terms hold it near that start (to learn new trees, train "
                            "a likelihood teacher on them first: docs/annotation.md)", name)
        objective = build_training_objective(
            cfg.objective.terms, vocabs=self.vocabs, labeled=self.data.labeled, device=self.device,
            loaded_teacher=teacher,
        )
        for kind in self.data.stream.keep_only(objective.streams(), names=objective.names):
            log.info("no objective term reads %s batches: that stream is not drawn", kind)
        self.objective = dist.objective(objective)
        self.batches = self.data.stream
        self.forward = dist.wrap(self.model)  # the model itself, or its DDP replica

    # -- one step -------------------------------------------------------------------------------

    def loss(self, batch: Any, *, step: int) -> StepLoss:
        kind, batch = batch
        batch = batch.to(self.device)
        out = self._forward(batch, step=step)
        output = self.objective(out, batch, step=step) if out is not None else None
        return StepLoss(output, kind=kind, sentences=batch.size, tokens=batch.n_tokens,
                        model_output=out)

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
                "infinite scores; lower optim.lr"
            )
        return None

    def step_scalars(self, loss: StepLoss) -> dict[str, float]:
        """Arc entropy (``logger.arc_entropy``) and, with a streamed corpus, this rank's bad
        records skipped so far (``train/bad_lines``)."""
        scalars = {}
        counts = self.data.stream.corpus_counts
        if counts is not None:
            scalars["train/bad_lines"] = float(counts["bad"])
        if self.cfg.logger.arc_entropy and loss.model_output is not None:
            scalars[f"train/arc_entropy_{loss.kind}"] = arc_entropy(loss.model_output)
        return scalars

    # -- evaluation -----------------------------------------------------------------------------

    def dev_score(self) -> DevScore | None:
        if self.data.dev is None:
            return None
        scores = parse(self.model, self.data.dev.sentences, self.vocabs,
                       tokens_per_batch=self.cfg.data.eval_tokens_per_batch, device=self.device).scores
        # LAS when relations are learned (labeled trees exist); else UAS (GE alone: LAS ~0).
        las = scores.get("las") if self.data.labeled else None
        return DevScore(
            value=las if las is not None else scores["uas"],
            scalars={k: v for k, v in scores.items() if k in ("uas", "las", "label_acc") and v is not None},
            summary=f"dev UAS {scores['uas']:.2f} LAS "
                    + ("n/a" if scores.get("las") is None else f"{scores['las']:.2f}"),
        )

    def final_evaluation(self, *, best_path: Path, run_dir: Path) -> FinalReport:
        restore_best(self.model, best_path)
        results: dict[str, Any] = {}
        metrics: dict[str, float | None] = {}
        for name, treebank in (("dev", self.data.dev), ("test", self.data.test)):
            if treebank is None:
                continue
            report = evaluate_split(
                self.model, treebank, self.vocabs, name=name, out_dir=run_dir,
                tokens_per_batch=self.cfg.data.eval_tokens_per_batch, device=self.device,
            )
            results[name] = report
            print(format_scores(name, report), flush=True)
            official = report.get("official") or {}
            metrics[f"{name}/uas"] = official.get("UAS", report.get("uas"))
            metrics[f"{name}/las"] = official.get("LAS", report.get("las"))
        return FinalReport(results, metrics)

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {"vocabs": self.vocabs.state_dict(), "objective": self._objective_state()}

    def _objective_state(self) -> dict[str, Any]:
        """The objective's mutable state; {} for a plain callable (e.g. one a test wraps)."""
        state_dict = getattr(self.objective, "state_dict", None)
        return state_dict() if callable(state_dict) else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved_model = state["config"]["model"]
        current = OmegaConf.to_container(self.cfg.model, resolve=True, enum_to_str=True)
        if saved_model != current:
            raise ValueError(
                f"trainer.resume: the checkpoint's model config {saved_model} differs from this "
                f"run's {current}; resume with the same model options"
            )
        # GE corpus expectations; a checkpoint of another objective (or an older one) leaves the
        # missing terms' state empty: said, since the run then does not continue exactly.
        missing, unexpected = self.objective.load_state_dict(state.get("objective", {}), strict=False)
        if missing or unexpected:
            log.warning("trainer.resume: objective state missing for terms %s, not used for terms "
                        "%s (another objective than the checkpoint's?): those start afresh",
                        missing, unexpected)


def _teacher_vocabularies(cfg, teacher: tuple[ParserModel, Vocabularies] | None) -> Vocabularies | None:
    """A new student's vocabularies: its teacher's, if it has one (a warning names the layers
    the run asks for that the teacher has no classes for: the student cannot predict them)."""
    if teacher is None:
        return None
    vocabs = teacher[1]
    log.info("vocabularies from the teacher: %d words, layers %s", len(vocabs.words), sorted(vocabs.layers) or "none")
    missing = sorted({layer.name for layer in layers_of(cfg.model)} - set(vocabs.layers))
    if missing:
        log.warning("model.layers %s: the teacher's vocabularies have no classes for them (its "
                    "training had none, or it ran without them): the student will not predict "
                    "them", missing)
    return vocabs


def _warm_start(path: str, *, device: torch.device) -> tuple[ParserModel, Vocabularies]:
    """The model and vocabularies of the parser checkpoint ``path`` (``model.init``)."""
    model, vocabs, _ = load_parser(existing_file(path, option="model.init"), device=device)
    return model, vocabs


@torch.no_grad()
def arc_entropy(out) -> float:
    """Mean entropy of the tree distribution per word of the batch (nats)."""
    dist = out.dist
    lengths = dist.lengths
    detached = type(dist)(dist.scores.detach(), lengths, single_root=dist.single_root)
    with torch.enable_grad():  # expectations may be computed as gradients
        entropy = detached.entropy()
    return float(entropy.sum()) / max(int(lengths.sum()), 1)
