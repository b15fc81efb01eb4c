"""The tokenizer and sentence splitter (:mod:`parser.tokenize`) as a task of the training loop:
batches of pieces of the training split's paragraph texts, the CRF's negative log-likelihood per
character, dev tokens F1 + sentences F1 (no dev split: the latest model is kept), and a checkpoint
:func:`parser.tokenize.load_tokenizer` reads (``kind``, ``hparams``, ``chars``, ``multiwords``,
``window``, ``context``, ``model``). ``model.init`` starts from another tokenizer's weights. The
final evaluation scores ``best.pt`` on dev and writes ``<run dir>/results.json``."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from parser.data.paths import existing_file
from parser.data.vocab import Vocab
from parser.objectives.base import Output
from parser.tokenize.data import Pieces, build_chars, cut_pieces, evaluate_tokenizer, split_path
from parser.tokenize.model import CharTagger
from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.segment import TrainedTokenizer, load_tokenizer, tokenizer_state
from parser.tokenize.text import read_paragraphs
from parser.train.task import DevScore, FinalReport, StepLoss, TaskContext, check_same_sizes

__all__ = ["TokenizerTask"]

log = logging.getLogger(__name__)


class TokenizerTask:
    """``cfg.data`` and ``cfg.model`` of a ``parser-train-tokenizer`` config."""

    def __init__(self, context: TaskContext) -> None:
        if context.dist.enabled:
            raise NotImplementedError("parser-train-tokenizer runs in one process (trainer.distributed=off)")
        cfg, data, resumed = context.cfg, context.cfg.data, context.resumed
        self.cfg, self.device = cfg, context.device
        train_path = split_path(data, "train")
        paragraphs = list(read_paragraphs(train_path))
        dev_path = split_path(data, "dev") if (data.dev_file or data.dev_split) else None
        self.dev = list(read_paragraphs(dev_path)) if dev_path else None
        chars = (Vocab.from_state_dict(resumed["chars"]) if resumed
                 else build_chars(paragraphs, min_freq=int(data.min_freq)))
        multiwords = (MultiwordTable.from_state_dict(resumed["multiwords"]) if resumed
                      else MultiwordTable.build(paragraphs))
        self.batches = Pieces.build(cut_pieces(paragraphs, segment=int(data.segment)), chars,
                                    batch_size=int(data.batch_size), seed=int(cfg.trainer.seed))
        m = cfg.model
        self.model = CharTagger(n_chars=len(chars), char_dim=m.char_dim, class_dim=m.class_dim,
                                hidden=m.hidden, layers=m.layers, dropout=m.dropout).to(self.device)
        self.tokenizer = TrainedTokenizer(self.model, chars, multiwords, int(m.window), int(m.context))
        if m.init and not resumed:
            self._init_from(existing_file(m.init, option="model.init"))
        log.info("tokenizer: %s: %d paragraphs, %d pieces, %d characters, %d multiword forms, "
                 "%d parameters", train_path, len(paragraphs), len(self.batches.chars), len(chars),
                 len(multiwords), sum(p.numel() for p in self.model.parameters()))

    def _init_from(self, path: Path) -> None:
        """Copy the weights of the tokenizer at ``path`` (a longer run in steps); its characters
        and model sizes must be this run's."""
        start = load_tokenizer(path)
        if start.chars != self.tokenizer.chars or start.model.hparams != self.model.hparams:
            raise ValueError(f"model.init={path}: its characters or model sizes differ from this run's")
        self.model.load_state_dict(start.model.state_dict())

    def loss(self, batch: Any, *, step: int) -> StepLoss:
        ids, classes, tags, lengths = (t.to(self.device) for t in batch)
        loss = -self.model(ids, classes, lengths).log_prob(tags).sum() / lengths.sum()
        return StepLoss(Output(loss, {"loss": loss.detach()}), kind="text",
                        sentences=len(lengths), tokens=int(lengths.sum()))

    def step_scalars(self, loss: StepLoss) -> dict[str, float]:
        return {}

    def dev_score(self) -> DevScore | None:
        if self.dev is None:
            return None
        scores = evaluate_tokenizer(self.tokenizer, self.dev)
        return DevScore(value=scores["tokens_f1"] + scores["sentences_f1"], scalars=scores,
                        summary=f"dev tokens F1 {scores['tokens_f1']:.2f} sentences F1 "
                                f"{scores['sentences_f1']:.2f}")

    def state_dict(self) -> dict[str, Any]:
        return tokenizer_state(self.tokenizer)  # the loop writes "model" itself too

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_same_sizes(state.get("hparams"), dict(self.model.hparams), model="tokenizer",
                         options="model.*")

    def final_evaluation(self, *, best_path: Path, run_dir: Path) -> FinalReport:
        results: dict[str, Any] = {"treebank": self.cfg.data.treebank, "checkpoint": str(best_path)}
        metrics: dict[str, float | None] = {}
        if self.dev is not None:
            scores = evaluate_tokenizer(load_tokenizer(best_path, device=self.device), self.dev)
            results["dev"] = scores
            metrics.update({f"dev/{key}": value for key, value in scores.items()})
            print(f"dev: tokens F1 {scores['tokens_f1']:.2f} sentences F1 "
                  f"{scores['sentences_f1']:.2f}", flush=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        return FinalReport(results, metrics)
