"""The data a run needs, from the ``data`` config group: treebank files, vocabularies, streams.

Reads the training file (its first ``max_train_sentences``), splits it into labeled trees and
unlabeled text (``labeled_size`` / ``labeled_fraction``), adds ``unlabeled_file`` when given,
builds the vocabularies from the training sentences (the unlabeled ones stripped of their trees
first), and makes the training stream and the dev/test batchers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from parser.config import DataConfig, OnInvalid
from parser.data.batching import BucketBatcher, EncodedSentence
from parser.data.conllu_io import Sentence, Treebank, read_conllu, read_tokenized
from parser.data.paths import resolve_ud_root, treebank_file
from parser.data.streams import TrainingStream, split_labeled, strip_annotation
from parser.data.vocab import Vocabularies
from parser.train.user_files import input_file

__all__ = ["TrainingData", "eval_batcher", "load_training_data", "read_split", "split_path"]

log = logging.getLogger(__name__)


def split_path(cfg: DataConfig, split: str) -> Path | None:
    """The file of ``split`` (train/dev/test): ``<split>_file`` if set, else the treebank's file
    of ``<split>_split`` under the data root; None when both are null."""
    explicit = getattr(cfg, f"{split}_file")
    if explicit:
        return input_file(explicit, option=f"data.{split}_file")
    name = getattr(cfg, f"{split}_split")
    if not name:
        return None
    return treebank_file(resolve_ud_root(cfg.root), cfg.treebank, name)


def read_split(cfg: DataConfig, split: str, *, require_trees: bool = True) -> Treebank | None:
    path = split_path(cfg, split)
    if path is None:
        return None
    on_invalid = "raise" if OnInvalid(cfg.on_invalid) is OnInvalid.error else "skip"
    treebank = read_conllu(path, on_invalid=on_invalid, require_trees=require_trees)
    if treebank.n_skipped:
        log.warning("%s: %d malformed sentence(s) skipped", path, treebank.n_skipped)
    return treebank


def read_unlabeled(path: str | Path, *, on_invalid: str) -> list[Sentence]:
    """A CoNLL-U file (trees, if any, removed) or one tokenised sentence per line."""
    path = input_file(path, option="data.unlabeled_file")
    if path.suffix in (".conllu", ".conll"):
        sentences = read_conllu(path, on_invalid=on_invalid, require_trees=False).sentences
    else:
        sentences = read_tokenized(path).sentences
    if not sentences:
        raise ValueError(f"data.unlabeled_file={path}: no sentences")
    return strip_annotation(sentences)


def eval_batcher(encoded: list[EncodedSentence], cfg: DataConfig) -> BucketBatcher:
    """Every sentence (no length limit), shortest first, with gold trees when present."""
    labeled = all(e.heads is not None for e in encoded)
    return BucketBatcher(
        encoded, tokens_per_batch=cfg.eval_tokens_per_batch, shuffle=False, max_length=None,
        labeled=labeled,
    )


@dataclass
class TrainingData:
    vocabs: Vocabularies
    stream: TrainingStream
    labeled: list[Sentence]
    unlabeled: list[Sentence]
    dev: Treebank | None
    test: Treebank | None


def load_training_data(
    cfg: DataConfig, *, seed: int, vocabs: Vocabularies | None = None, num_replicas: int = 1,
    rank: int = 0,
) -> TrainingData:
    """Read the files, build (or reuse, when resuming) the vocabularies, make the stream."""
    train = read_split(cfg, "train")
    sentences = list(train.sentences) if train is not None else []
    if cfg.max_train_sentences is not None:
        sentences = sentences[: cfg.max_train_sentences]
    labeled_ids, unlabeled_ids = split_labeled(
        len(sentences), labeled_size=cfg.labeled_size, labeled_fraction=cfg.labeled_fraction,
        seed=cfg.subset_seed,
    )
    labeled = [sentences[i] for i in labeled_ids]
    unlabeled = strip_annotation([sentences[i] for i in unlabeled_ids])
    if cfg.unlabeled_file:
        on_invalid = "raise" if OnInvalid(cfg.on_invalid) is OnInvalid.error else "skip"
        unlabeled += read_unlabeled(cfg.unlabeled_file, on_invalid=on_invalid)
    if not labeled and not unlabeled:
        raise ValueError(
            f"data: nothing to train on for treebank {cfg.treebank!r} (no training file "
            "and no data.unlabeled_file)"
        )
    for part, what in ((labeled, "labeled"), (unlabeled, "unlabeled")):
        # Longer sentences are skipped (and counted) by the batchers; none left is an error.
        if part and cfg.max_length is not None and min(len(s) for s in part) > cfg.max_length:
            raise ValueError(
                f"data.max_length={cfg.max_length}: all {len(part)} {what} training sentences "
                f"are longer (shortest: {min(len(s) for s in part)} words); raise data.max_length"
            )
    if vocabs is None:
        vocabs = Vocabularies.build(labeled + unlabeled, min_freq=cfg.min_freq)
    log.info("training on %d labeled and %d unlabeled sentences", len(labeled), len(unlabeled))

    stream = TrainingStream.from_sentences(
        labeled, unlabeled, vocabs, tokens_per_batch=cfg.tokens_per_batch,
        max_length=cfg.max_length, unlabeled_ratio=cfg.unlabeled_ratio, seed=seed,
        num_replicas=num_replicas, rank=rank,
    )
    return TrainingData(
        vocabs=vocabs, stream=stream, labeled=labeled, unlabeled=unlabeled,
        dev=read_split(cfg, "dev"), test=read_split(cfg, "test"),
    )
