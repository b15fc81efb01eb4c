"""The data a run needs, from the ``data`` config group: treebank files, vocabularies, streams.

Checks the treebank first, from its files (:func:`check_treebank`: no text, no training file),
carves a dev set from the training sentences where the treebank has no dev file, reads the
training file (its first ``max_train_sentences``), splits it into labeled trees and
unlabeled text (``labeled_size`` / ``labeled_fraction``), adds ``unlabeled_file`` when given,
tags the unlabeled text with ``data.tagger`` where it lacks UPOS (every word with
``data.retag_unlabeled``), builds the vocabularies from the training sentences (the unlabeled ones
stripped of their trees first), keeps ``unlabeled_size`` of the unlabeled sentences (after the
vocabulary, so that every size shares a teacher), and makes the training stream and the
dev/test batchers. With
``unlabeled_corpus`` the unlabeled batches stream from disk (:mod:`parser.train.corpus_data`):
the training file's own unlabeled text is the corpus's first records, and ``unlabeled`` holds
only that text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from parser.config import DataConfig, OnInvalid
from parser.constraints.spec import UPOS_TAGS
from parser.data.batching import BucketBatcher, EncodedSentence
from parser.data.conllu_io import Sentence, Treebank, read_conllu, read_tokenized
from parser.data.layers import TokenLayer
from parser.data.partial_trees import has_heads, read_partial_trees, refuse_selection_file
from parser.data.paths import SPLITS, resolve_ud_root, treebank_file
from parser.data.streams import TrainingStream, split_labeled, strip_annotation, unlabeled_subset
from parser.data.treebanks import MIN_CARVED_DEV, TreebankInfo, carved_dev_size, read_treebank_info
from parser.data.vectors import vocabularies_with_vectors
from parser.data.vocab import Vocabularies
from parser.inference import missing_upos, tag_input
from parser.objectives import terms_needing
from parser.runtime.checkpoint import CheckpointError
from parser.runtime.user_files import input_file
from parser.structs import is_projective
from parser.tagger.predict import load_tagger
from parser.train.corpus_data import corpus_batcher

__all__ = [
    "TrainingData",
    "carve_dev",
    "carves_dev",
    "check_treebank",
    "eval_batcher",
    "load_training_data",
    "projective_only",
    "read_split",
    "split_path",
    "tag_unlabeled",
    "upos_term_names",
]

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


def check_treebank(cfg: DataConfig) -> TreebankInfo | None:
    """The treebank the run reads under the data root, described from its files and checked
    before anything is built: ValueError naming it when its FORM column holds no text (en_esl) or
    when ``train_split=train`` and it has no training file (en_pud: test only). None when every
    split read is a ``*_file`` path."""
    if all(getattr(cfg, f"{s}_file") or not getattr(cfg, f"{s}_split") for s in SPLITS):
        return None
    root = resolve_ud_root(cfg.root)
    info = read_treebank_info(root, cfg.treebank)
    info.require_text()
    if cfg.train_split == "train" and not cfg.train_file:
        info.require_train(root=root)
    log.info("treebank %s under %s", info.describe(), root)
    return info


def carves_dev(cfg: DataConfig, info: TreebankInfo | None) -> bool:
    """Whether the dev set comes from the training sentences: ``dev_split=dev`` (the default)
    on a treebank that distributes no dev file (kk_ktb)."""
    return (info is not None and not cfg.dev_file and cfg.dev_split == "dev"
            and "dev" not in info.files)


def carve_dev(sentences: list[Sentence], *, fraction: float, name: str
              ) -> tuple[list[Sentence], Treebank | None]:
    """``(training sentences, dev set)`` of a treebank with no dev file: the last ``fraction``
    of the training sentences (file order: a block of whole documents, the same for every seed)
    are the dev set; under 20 of them, there is none (no model selection). The run log says
    which. The dev set's ``path`` is no file: its gold file is written beside the predictions."""
    size = carved_dev_size(len(sentences), fraction=fraction)
    if not size:
        log.info("%s has no dev file and %d training sentences (data.dev_fraction=%s would carve "
                 "fewer than %d): no dev set, no model selection; the model of the last step is "
                 "kept", name, len(sentences), fraction, MIN_CARVED_DEV)
        return sentences, None
    log.info("%s has no dev file: the dev set is the last %d of its %d training sentences "
             "(data.dev_fraction=%s); training on the first %d", name, size, len(sentences),
             fraction, len(sentences) - size)
    path = f"{sentences[0].path} (last {size} sentences, carved as dev)"
    return sentences[:-size], Treebank(path=path, sentences=sentences[-size:])


def read_split(cfg: DataConfig, split: str, *, require_trees: bool = True) -> Treebank | None:
    path = split_path(cfg, split)
    if path is None:
        return None
    on_invalid = "raise" if OnInvalid(cfg.on_invalid) is OnInvalid.error else "skip"
    if split == "train" and cfg.partial_trees:  # HEAD '_' and annotation files (docs/annotation.md)
        return read_partial_trees(path, on_invalid=on_invalid,
                                  annotated_columns=cfg.annotated_columns)
    if split == "train":
        refuse_selection_file(path, option="data.train_file")
    treebank = read_conllu(path, on_invalid=on_invalid, require_trees=require_trees,
                           partial_option="data.partial_trees=true" if split == "train" else None)
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


def upos_term_names(terms: Mapping | None) -> list[str]:
    """The names of the active objective terms whose kind declares that it reads UPOS (the
    objective registry's ``needs``; GE today), so that unlabeled text without tags is an error."""
    return terms_needing(terms, "upos")


def tag_unlabeled(
    sentences: list[Sentence], cfg: DataConfig, *, upos_needed_by: list[str]
) -> list[Sentence]:
    """``sentences`` with UPOS from ``cfg.tagger`` where theirs is ``_`` (every word when
    ``cfg.retag_unlabeled``); unchanged when there is nothing to tag. Without a tagger, missing
    UPOS is an error when ``upos_needed_by`` names a consumer (a GE term reads UPOS)."""
    missing, total = missing_upos(sentences)
    if not cfg.tagger:
        if cfg.retag_unlabeled:
            raise ValueError("data.retag_unlabeled=true needs data.tagger (a tagger checkpoint)")
        if missing and upos_needed_by:
            raise ValueError(
                f"data.tagger: {missing} of {total} unlabeled words have no UPOS ('_' or a "
                f"tokenised text file) and {', '.join(upos_needed_by)} reads UPOS; set "
                "data.tagger=<tagger checkpoint> to tag them"
            )
        return sentences
    if not missing and not cfg.retag_unlabeled:
        log.info("data.tagger: the unlabeled text has UPOS on every word; not tagged")
        return sentences
    try:
        tagger = load_tagger(input_file(cfg.tagger, option="data.tagger"))
    except CheckpointError as error:
        raise CheckpointError(f"data.tagger: {error}") from error
    tagged, _ = tag_input(sentences, tagger, retag=cfg.retag_unlabeled,
                          tokens_per_batch=cfg.eval_tokens_per_batch)
    n_tagged = len(sentences) if cfg.retag_unlabeled else sum(None in s.upos for s in sentences)
    log.info("data.tagger: tagged %d of %d unlabeled sentences (%s; %d of %d words had no UPOS) "
             "with %s", n_tagged, len(sentences),
             "every word retagged" if cfg.retag_unlabeled else "missing UPOS only",
             missing, total, cfg.tagger)
    return tagged


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
    # model.vectors' rows ``[len(vocabs.vectors), vocabs.vector_dim]`` for a new model (None:
    # no vectors, or vocabularies given, whose model's weights hold them)
    vector_rows: np.ndarray | None = None


def load_training_data(
    cfg: DataConfig, *, seed: int, vocabs: Vocabularies | None = None, num_replicas: int = 1,
    rank: int = 0, objective_terms: Mapping | None = None, projective_trees: bool = False,
    layers: Sequence[TokenLayer] = (), layer_max_classes: int = 1000,
    tag_dictionary: TokenLayer | None = None, vectors: Mapping | None = None,
) -> TrainingData:
    """Read the files, tag the unlabeled text (``data.tagger``), build (or reuse, when
    resuming) the vocabularies, make the stream. ``objective_terms`` (``objective.terms``) says
    whether a term reads the unlabeled text's UPOS: missing UPOS and no tagger is then an error.
    ``projective_trees`` (``model.crf=projective``): labeled trees that are not projective are
    left out (:func:`projective_only`). ``layers``: the token-level layers whose classes the
    vocabularies hold (at most ``layer_max_classes`` each), built from the labeled trees;
    ``tag_dictionary``: the UPOS dictionary to build too (a parser that tags its own words);
    ``vectors`` (``model.vectors``): with a ``path``, new vocabularies keep its rows for the
    training words (:func:`parser.data.vectors.vocabularies_with_vectors`)."""
    info = check_treebank(cfg)
    train = read_split(cfg, "train")
    sentences = list(train.sentences) if train is not None else []
    if carves_dev(cfg, info):
        sentences, dev = carve_dev(sentences, fraction=cfg.dev_fraction, name=info.code)
    else:
        dev = read_split(cfg, "dev")
    if cfg.max_train_sentences is not None:
        sentences = sentences[: cfg.max_train_sentences]
    labeled_ids, unlabeled_ids = split_labeled(
        len(sentences), labeled_size=cfg.labeled_size, labeled_fraction=cfg.labeled_fraction,
        seed=cfg.subset_seed,
    )
    labeled = [sentences[i] for i in labeled_ids]
    if projective_trees:
        labeled = projective_only(labeled)
    unlabeled = strip_annotation([sentences[i] for i in unlabeled_ids])
    if cfg.partial_trees:  # a sentence whose words all lack a head is text: unlabeled
        unlabeled += strip_annotation([s for s in labeled if not has_heads(s)])
        labeled = [s for s in labeled if has_heads(s)]
    if cfg.unlabeled_file:
        on_invalid = "raise" if OnInvalid(cfg.on_invalid) is OnInvalid.error else "skip"
        unlabeled += read_unlabeled(cfg.unlabeled_file, on_invalid=on_invalid)
    needed_by = [f"objective term {name!r}" for name in upos_term_names(objective_terms)]
    if unlabeled:
        unlabeled = tag_unlabeled(unlabeled, cfg, upos_needed_by=needed_by)
    elif cfg.retag_unlabeled:
        log.warning("data.retag_unlabeled=true but there is no unlabeled text to retag")
    if not labeled and not unlabeled and not cfg.unlabeled_corpus:
        raise ValueError(
            f"data: nothing to train on for treebank {cfg.treebank!r} (no training file, "
            "no data.unlabeled_file and no data.unlabeled_corpus)"
        )
    for part, what in ((labeled, "labeled"), (unlabeled, "unlabeled")):
        # Longer sentences are skipped (and counted) by the batchers; none left is an error.
        if part and cfg.max_length is not None and min(len(s) for s in part) > cfg.max_length:
            raise ValueError(
                f"data.max_length={cfg.max_length}: all {len(part)} {what} training sentences "
                f"are longer (shortest: {min(len(s) for s in part)} words); raise data.max_length"
            )
    report_unknown_upos(labeled + unlabeled)
    vector_rows = None
    if vocabs is None:
        vocabs = Vocabularies.build(labeled + unlabeled, min_freq=cfg.min_freq, layers=layers,
                                    max_classes=layer_max_classes, tag_dictionary=tag_dictionary)
        if vectors is not None and vectors.get("path"):
            vocabs, vector_rows = vocabularies_with_vectors(
                vocabs, labeled + unlabeled, path=vectors["path"], max_rows=int(vectors["max_rows"]))
    if cfg.unlabeled_size is not None:
        # After the vocabulary: every size has the full-size run's, so one teacher serves them all.
        unlabeled = [unlabeled[i] for i in unlabeled_subset(len(unlabeled), size=cfg.unlabeled_size,
                                                            seed=cfg.subset_seed)]
    log.info("training on %d labeled and %d unlabeled sentences%s", len(labeled), len(unlabeled),
             f" and the corpus {cfg.unlabeled_corpus}" if cfg.unlabeled_corpus else "")
    corpus = None
    if cfg.unlabeled_corpus:
        corpus = corpus_batcher(cfg, unlabeled, vocabs, seed=seed, num_replicas=num_replicas,
                                rank=rank, needs_upos=needed_by)
    stream = TrainingStream.from_sentences(
        labeled, [] if corpus is not None else unlabeled, vocabs,
        tokens_per_batch=cfg.tokens_per_batch, max_length=cfg.max_length,
        unlabeled_ratio=cfg.unlabeled_ratio, seed=seed, num_replicas=num_replicas, rank=rank,
        corpus=corpus,
    )
    return TrainingData(
        vocabs=vocabs, stream=stream, labeled=labeled, unlabeled=unlabeled,
        dev=dev, test=read_split(cfg, "test"), vector_rows=vector_rows,
    )


def projective_only(labeled: list[Sentence]) -> list[Sentence]:
    """``labeled`` without its complete trees that are not projective (logged with their count):
    a projective tree CRF gives such a tree probability 0, so its likelihood would be infinite
    and every step holding it skipped (SuPar's ``--proj`` leaves them out the same way). A
    partially annotated sentence stays: its likelihood sums over the projective trees that
    agree with it (none, and an infinite loss again, if its given arcs already cross)."""
    complete = [i for i, s in enumerate(labeled) if s.is_annotated]
    if not complete:
        return labeled
    heads = pad_sequence([torch.tensor([0, *labeled[i].heads]) for i in complete], batch_first=True)
    lengths = torch.tensor([len(labeled[i]) for i in complete])
    dropped = {i for i, ok in zip(complete, is_projective(heads, lengths).tolist()) if not ok}
    if dropped:
        log.warning("model.crf=projective: %d of %d labeled training trees are not projective and "
                    "are left out (the projective tree CRF gives them probability 0)",
                    len(dropped), len(labeled))
    return [s for i, s in enumerate(labeled) if i not in dropped]


def report_unknown_upos(sentences: list[Sentence]) -> int:
    """Log (WARNING) how many words of the training ``sentences`` carry a UPOS tag outside UD's
    17, with examples (a tag set mix-up, or XPOS in the UPOS column); they are kept as tags of
    their own. Returns that count."""
    unknown: dict[str, int] = {}
    first: dict[str, str] = {}
    for sentence in sentences:
        for tag, line in zip(sentence.upos, sentence.word_lines):
            if tag is not None and tag not in UPOS_TAGS:
                unknown[tag] = unknown.get(tag, 0) + 1
                first.setdefault(tag, f"{sentence.path}:{line}")
    count = sum(unknown.values())
    if count:
        examples = sorted(unknown, key=lambda t: -unknown[t])[:5]
        log.warning("training data: %d words have a UPOS tag outside UD's 17 (%d distinct: %s); "
                    "they are kept as tags of their own", count, len(unknown),
                    ", ".join(f"{t} x{unknown[t]} (first at {first[t]})" for t in examples))
    return count
