"""The UPOS tagger (:mod:`parser.tagger`) as a task of the training loop: labeled / unlabeled
treebank batches, its weighted objective (likelihood, entropy, GE on tag proportions), dev UPOS
accuracy, and a checkpoint :func:`parser.tagger.load_tagger` reads (``kind``, ``hparams``,
``vocabs``, ``model``). The final evaluation scores ``best.pt`` on dev and test, prints the
figures and writes them to ``<run dir>/results.json``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from parser.data.vocab import N_SPECIAL, Vocabularies
from parser.tagger.data import build_constraints, load_tag_data
from parser.tagger.model import Tagger
from parser.tagger.objectives import build_tag_objective
from parser.tagger.predict import TrainedTagger, load_tagger, tagger_state, upos_accuracy
from parser.train.task import DevScore, FinalReport, StepLoss, TaskContext, check_same_sizes

__all__ = ["TaggerTask"]

log = logging.getLogger(__name__)


class TaggerTask:
    """``cfg.data``, ``cfg.tagger`` (the model's sizes) and ``cfg.objective`` of a
    ``parser-train-tagger`` config."""

    def __init__(self, context: TaskContext) -> None:
        if context.dist.enabled:
            raise NotImplementedError("parser-train-tagger runs in one process (trainer.distributed=off)")
        cfg = self.cfg = context.cfg
        self.device = context.device
        vocabs = Vocabularies.from_state_dict(context.resumed["vocabs"]) if context.resumed else None
        self.data = load_tag_data(cfg.data, max_train_sentences=cfg.data.max_train_sentences,
                                  seed=int(cfg.trainer.seed), vocabs=vocabs)
        self.vocabs = self.data.vocabs
        sizes = cfg.tagger
        self.model = Tagger(
            n_words=len(self.vocabs.words), n_chars=len(self.vocabs.chars),
            n_tags=len(self.vocabs.upos) - N_SPECIAL, word_dim=sizes.word_dim,
            char_dim=sizes.char_dim, char_hidden=sizes.char_hidden, char_out=sizes.char_out,
            lstm_hidden=sizes.lstm_hidden, lstm_layers=sizes.lstm_layers, dropout=sizes.dropout,
            word_dropout=sizes.word_dropout,
        ).to(self.device)
        spec = OmegaConf.to_container(cfg.objective, resolve=True)
        ge_options = [o or {} for n, o in spec.items() if (o or {}).get("type", n) == "ge"]
        constraints = (build_constraints(ge_options[0], self.data.labeled, self.vocabs)
                       if ge_options else None)
        self.objective = build_tag_objective(spec, constraints=constraints)
        if "labeled" in self.objective.streams() and self.data.stream.labeled is None:
            raise ValueError("objective has labeled terms but data.labeled_size=0 leaves no labeled sentences")
        self.batches = self.data.stream
        log.info("tagger: %d parameters, %d steps per epoch",
                 sum(p.numel() for p in self.model.parameters()), len(self.batches.primary))

    def loss(self, batch: Any, *, step: int) -> StepLoss:
        kind, batch = batch
        batch = batch.to(self.device)
        output = self.objective(self.model(batch), batch, step=step)
        return StepLoss(output, kind=kind, sentences=batch.size, tokens=batch.n_tokens)

    def step_scalars(self, loss: StepLoss) -> dict[str, float]:
        return {}

    def dev_score(self) -> DevScore:
        score = upos_accuracy(TrainedTagger(self.model, self.vocabs), self.data.dev.sentences,
                              tokens_per_batch=int(self.cfg.data.eval_tokens_per_batch))
        return DevScore(value=score["accuracy"], scalars={"upos": 100 * score["accuracy"]},
                        summary=f"dev UPOS {100 * score['accuracy']:.2f}%")

    def state_dict(self) -> dict[str, Any]:
        return tagger_state(self.model, self.vocabs)  # the loop writes "model" itself too

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_same_sizes(state.get("hparams"), dict(self.model.hparams), model="tagger",
                         options="tagger.*")

    def final_evaluation(self, *, best_path: Path, run_dir: Path) -> FinalReport:
        trained = load_tagger(best_path, map_location=self.device)
        results: dict[str, Any] = {"treebank": self.cfg.data.treebank, "checkpoint": str(best_path),
                                   "train_sentences": len(self.data.labeled),
                                   "unlabeled_sentences": len(self.data.unlabeled)}
        metrics: dict[str, float | None] = {}
        for name, treebank in (("dev", self.data.dev), ("test", self.data.test)):
            score = None if treebank is None else upos_accuracy(
                trained, treebank.sentences, tokens_per_batch=int(self.cfg.data.eval_tokens_per_batch))
            results[name] = score
            if score is not None:
                metrics[f"{name}/upos"] = 100 * score["accuracy"]
                print(f"{name}: UPOS {100 * score['accuracy']:.2f} ({score['correct']}/{score['total']})",
                      flush=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        return FinalReport(results, metrics)
