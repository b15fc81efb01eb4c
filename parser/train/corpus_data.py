"""The streamed unlabeled corpus of a run (``data.unlabeled_corpus``, docs/corpora.md): its files,
format, raw-text segmenter (a tokenizer checkpoint or the tokenizer of a pipeline file, built here
because :mod:`parser.data` sits below :mod:`parser.tokenize`) and its batcher."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from parser.config import CorpusFormat, DataConfig
from parser.data.conllu_io import Sentence
from parser.data.corpus import Segment, UnlabeledCorpus
from parser.data.corpus_batches import CorpusBatcher
from parser.data.corpus_files import corpus_files, detect_format
from parser.data.vocab import Vocabularies
from parser.runtime.checkpoint import CheckpointError, load_checkpoint
from parser.runtime.user_files import input_file
from parser.tokenize import TrainedTokenizer, iter_sentences, tokenizer_from_state

__all__ = ["corpus_batcher", "load_segmenter"]

log = logging.getLogger(__name__)

OPTION = "data.unlabeled_corpus"


def load_segmenter(path: str) -> Segment:
    """A paragraph -> sentences of words function from a ``parser-train-tokenizer`` checkpoint
    or a pipeline file (``parser-pipeline build``: its tokenizer)."""
    where = f"data.unlabeled_tokenizer={path}"
    state = load_checkpoint(input_file(path, option="data.unlabeled_tokenizer"), map_location="cpu")
    if state.get("kind") == "pipeline":
        if not state.get("tokenizer"):
            raise CheckpointError(f"{where}: the pipeline file holds no tokenizer")
        state = state["tokenizer"]
    tokenizer = tokenizer_from_state(state, where=where)
    return lambda paragraph: _words(tokenizer, paragraph)


def _words(tokenizer: TrainedTokenizer, paragraph: str) -> Iterable[list[str]]:
    return [sentence.forms for sentence in iter_sentences(tokenizer, [paragraph])]


def corpus_batcher(cfg: DataConfig, head: Sequence[Sentence], vocabs: Vocabularies, *, seed: int,
                   num_replicas: int, rank: int, needs_upos: list[str]) -> CorpusBatcher:
    """The batcher of ``cfg.unlabeled_corpus`` after the in-memory unlabeled ``head`` (the
    training file's own text), sharded by ``rank``. ``needs_upos`` names the objective terms
    that read UPOS: only a CoNLL-U corpus has it (``data.tagger`` tags text in memory only)."""
    files = corpus_files(cfg.unlabeled_corpus, option=OPTION)
    segment = load_segmenter(cfg.unlabeled_tokenizer) if cfg.unlabeled_tokenizer else None
    fmt = detect_format(files, given=CorpusFormat(cfg.unlabeled_format).value,
                        has_segmenter=segment is not None, option="data.unlabeled_format")
    if needs_upos and fmt != "conllu":
        raise ValueError(f"{OPTION}={cfg.unlabeled_corpus}: {fmt} text has no UPOS and "
                         f"{', '.join(needs_upos)} reads UPOS; give the corpus as CoNLL-U with UPOS "
                         "(parser-predict with a pipeline writes it)")
    corpus = UnlabeledCorpus(
        files, fmt=fmt, segment=segment, head=[(s.forms, s.upos) for s in head],
        max_words=cfg.max_sentence_words, max_bad_share=cfg.max_bad_share,
        num_replicas=num_replicas, rank=rank, option=OPTION,
    )
    log.info("%s: streaming %d %s file(s) from %s (rank %d of %d; shuffle buffer %d sentences)",
             OPTION, len(files), fmt, cfg.unlabeled_corpus, rank, num_replicas, cfg.shuffle_buffer)
    return CorpusBatcher(corpus, vocabs, tokens_per_batch=cfg.tokens_per_batch,
                         buffer_size=cfg.shuffle_buffer, seed=seed + 1, max_length=cfg.max_length)
