"""The tagger's data, from the ``data`` node of its config: treebank files, vocabularies, the
training stream and the GE constraints.

Reuses the data layer: ``read_conllu``, ``Vocabularies`` and the labeled / unlabeled
``TrainingStream.from_sentences`` the parser's trainer builds its stream with. Sentences in the unlabeled part lose their UPOS (and
trees) before encoding, so entropy and GE terms never see gold tags.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from parser.data.conllu_io import Sentence, Treebank, read_conllu
from parser.data.paths import existing_file, resolve_ud_root, treebank_file
from parser.data.streams import TrainingStream, split_labeled, strip_annotation
from parser.data.vocab import N_SPECIAL, Vocabularies
from parser.tagger.config import TagDataConfig
from parser.tagger.features import TagConstraints, TagFeature, estimate_targets, frequent_forms

__all__ = ["TagData", "build_constraints", "load_tag_data", "split_file", "strip_tags"]

log = logging.getLogger(__name__)


def split_file(cfg: TagDataConfig, split: str) -> Path:
    """``data.<split>_file`` if set, else the treebank's file of that split under the data root."""
    explicit = getattr(cfg, f"{split}_file")
    if explicit:
        return existing_file(explicit, option=f"data.{split}_file")
    return treebank_file(resolve_ud_root(cfg.root), cfg.treebank, split)


def strip_tags(sentences: Sequence[Sentence]) -> list[Sentence]:
    """The sentences as raw text: UPOS, heads and relations removed."""
    return [replace(s, upos=[None] * len(s)) for s in strip_annotation(sentences)]


@dataclass
class TagData:
    vocabs: Vocabularies
    stream: TrainingStream
    labeled: list[Sentence]
    unlabeled: list[Sentence]
    dev: Treebank
    test: Treebank | None


def load_tag_data(
    cfg: TagDataConfig, *, max_train_sentences: int | None, seed: int,
    vocabs: Vocabularies | None = None,
) -> TagData:
    """Read train (its first ``max_train_sentences``), dev and test (when the file exists), split
    train into labeled / unlabeled, build the vocabularies (unless given) and the stream."""
    train = read_conllu(split_file(cfg, "train"))
    sentences = list(train.sentences)
    if max_train_sentences is not None:
        if max_train_sentences < 1:
            raise ValueError(f"tagger.max_train_sentences={max_train_sentences}: must be >= 1")
        sentences = sentences[:max_train_sentences]
    labeled_ids, unlabeled_ids = split_labeled(
        len(sentences), labeled_size=cfg.labeled_size, labeled_fraction=None,
        seed=cfg.subset_seed,
    )
    labeled = [sentences[i] for i in labeled_ids]
    unlabeled = strip_tags([sentences[i] for i in unlabeled_ids])
    if vocabs is None:
        vocabs = Vocabularies.build(labeled + unlabeled, min_freq=cfg.min_freq)
    log.info("tagger: %d labeled and %d unlabeled training sentences, %d tags", len(labeled),
             len(unlabeled), len(vocabs.upos) - N_SPECIAL)

    stream = TrainingStream.from_sentences(
        labeled, unlabeled, vocabs, tokens_per_batch=cfg.tokens_per_batch,
        max_length=cfg.max_length, unlabeled_ratio=cfg.unlabeled_ratio, seed=seed,
    )
    dev = read_conllu(split_file(cfg, "dev"), require_trees=False)
    try:
        test_path = split_file(cfg, "test")
    except ValueError as error:  # a treebank without a test file: report dev only
        log.warning("no test split: %s", error)
        test = None
    else:
        test = read_conllu(test_path, require_trees=False)
    return TagData(vocabs, stream, labeled, unlabeled, dev, test)


def build_constraints(
    options: Mapping, labeled: Sequence[Sentence], vocabs: Vocabularies
) -> TagConstraints:
    """GE constraints of a ``ge`` objective term: the ``top_forms`` (default 50) most frequent
    lowercased forms of the training text and the ``suffixes`` (default: none), with target tag
    proportions estimated on the ``labeled`` sentences (``smoothing``, default 0.1)."""
    if not labeled:
        raise ValueError("objective ge: targets are estimated on labeled sentences; there are none")
    top_forms = int(options.get("top_forms") if options.get("top_forms") is not None else 50)
    suffixes = list(options.get("suffixes") or [])
    smoothing = options.get("smoothing")
    features = frequent_forms(labeled, top_k=top_forms)
    features += [TagFeature("suffix", s) for s in suffixes]
    targets, counts = estimate_targets(
        labeled, features, vocabs.upos, smoothing=0.1 if smoothing is None else float(smoothing)
    )
    unseen = [f.name for f, c in zip(features, counts.tolist()) if c == 0]
    if unseen:
        log.warning("ge: %d feature(s) fire on no labeled word (uniform targets): %s",
                    len(unseen), ", ".join(unseen))
    return TagConstraints(features, targets, vocabs.chars)
