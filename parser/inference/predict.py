"""Tag (when needed) and parse a file with a trained checkpoint: the pipeline behind
``parser-predict`` and ``parser-evaluate checkpoint=...`` (see :mod:`parser.cli.predict` for the
input and output formats and the UPOS rules). The file is streamed: memory holds one chunk of
sentences, whatever the input's length."""

from __future__ import annotations

import logging
from pathlib import Path

from parser.data.conllu_stream import stream_conllu, stream_tokenized
from parser.inference.annotator import Annotator, ParseCount
from parser.inference.options import PredictOptions
from parser.inference.parse import reads_upos, report_unknown_words
from parser.runtime.device import bound_kernel_cache, resolve_device
from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import input_file, output_file
from parser.tagger.predict import load_tagger

__all__ = ["predict_file", "report_failures"]

log = logging.getLogger("parser.predict")

# An input of at most this many words is read once: the check's pass keeps its sentences for the
# parse (reading CoNLL-U is about 1.4 ms a sentence, a sixth of a parse on one core); a longer
# one is read again, chunk by chunk, so memory stays bounded.
READ_ONCE_WORDS = 100_000
DEFAULTS = PredictOptions()


def predict_file(
    checkpoint: str | Path, input_path: str | Path, output_path: str | Path,
    options: PredictOptions = DEFAULTS, *, tagger: str | Path | None = None,
) -> ParseCount:
    """Parse ``input_path`` (CoNLL-U, or tokenised text: ``options.format``) with ``checkpoint``,
    write ``output_path`` atomically; returns the number of sentences read, with ``failed``: those
    written as read with ``# parse_error`` (not parsed: see
    :mod:`parser.inference.annotator`; over ``max_words``, among others). The input is checked
    whole before the model loads, then annotated ``options.chunk_size`` sentences at a time: the
    check's sentences are kept when the input has at most :data:`READ_ONCE_WORDS` words, and a
    longer input is read a second time (memory does not grow with its length). ``tagger`` tags
    the words without UPOS (all when ``options.retag``); the decoder fields of ``options``
    override the checkpoint's decoder; the others are the
    :class:`~parser.inference.annotator.Annotator`'s (:class:`PredictOptions`)."""
    bound_kernel_cache()
    input_path = input_file(input_path, option="input")
    tagger = None if tagger is None else input_file(tagger, option="tagger")
    output_path = output_file(output_path, option="output",
                              inputs=(input_path, checkpoint, *([tagger] if tagger else [])))
    if options.format == "raw":
        raise ValueError("format=raw: raw text needs pipeline=<file> or tokenizer=<checkpoint>")
    format, keep_heads = options.format, options.keep_heads
    is_conllu = format == "conllu" or (format == "auto" and input_path.suffix in (".conllu", ".conll"))

    def sentences(*, report: bool):  # read anew on each call, one sentence at a time
        if not is_conllu:
            return stream_tokenized(input_path)
        return stream_conllu(input_path, on_invalid="raise" if options.on_invalid == "error" else "skip",
                             require_trees=False, report=report, check_heads=keep_heads != "given")

    # First pass: the whole input checked (a bad line fails before the model loads), UPOS counted.
    count, missing, total, kept = _count(sentences(report=True), keep_words=READ_ONCE_WORDS)
    annotator = Annotator.load(
        checkpoint, options, name=str(input_path),
        tagger=_tagger(tagger, retag=options.retag, missing=missing, total=total,
                       device=options.device, input_path=input_path))
    _check_upos(annotator, tagger, missing=missing, total=total, input_path=input_path)
    # Second pass: chunk by chunk, in input order; the output replaces nothing until it is whole.
    unknown = failed = 0
    with atomic_write(output_path) as out:
        again = kept if kept is not None else sentences(report=False)
        for part in annotator.stream(again, chunk_size=options.chunk_size):
            out.writelines(part.blocks)
            unknown, failed = unknown + part.unknown, failed + part.failed
    report_unknown_words(unknown, total, name=str(input_path))
    report_failures(failed, count, name=str(input_path))
    return ParseCount(count, failed=failed)


def report_failures(failed: int, count: int, *, name: str) -> None:
    """Warn, when some sentences were not parsed, how many (the warnings before name each)."""
    if failed:
        log.warning("%s: %d of %d sentences failed (not parsed: written as read, with a "
                    "'# parse_error' comment)", name, failed, count)


def _count(sentences, *, keep_words: int) -> tuple[int, int, int, list | None]:
    """``(sentences, words without UPOS, words, the sentences or None)`` of a stream: the
    sentences themselves while they hold at most ``keep_words`` words, None past that."""
    count = missing = total = 0
    kept: list | None = []
    for sentence in sentences:
        count, total = count + 1, total + len(sentence)
        missing += sum(tag is None for tag in sentence.upos)
        if kept is not None and total > keep_words:
            kept = None  # too long to hold: the parse reads it again
        if kept is not None:
            kept.append(sentence)
    return count, missing, total, kept


def _check_upos(annotator: Annotator, tagger, *, missing: int, total: int, input_path) -> None:
    """Refuse an untagged input for a parser that reads UPOS; warn when some tags are missing."""
    if tagger is not None or not missing or not reads_upos(annotator.config):
        return
    if missing == total:
        raise ValueError(
            f"input={input_path}: has no UPOS tags (text, or a UPOS column of '_' only) and the "
            "parser was trained with UPOS input: pass tagger=<tagger best.pt> to tag it first "
            "(parser-train-tagger trains one)")
    log.warning("%s: %d of %d words have no UPOS ('_') and no tagger= was given: they are read "
                "as unknown tags", input_path, missing, total)


def _tagger(path, *, retag: bool, missing: int, total: int, device: str, input_path):
    """The tagger of ``tagger=`` when it has words to tag (all with ``retag``), else None."""
    if path is None:
        if retag:
            raise ValueError("retag=true: give the tagger to tag with (tagger=<tagger best.pt>)")
        return None
    if not (retag or missing):
        log.info("%s: every word has a UPOS tag; tagger= not used (retag=true to replace them)",
                 input_path)
        return None
    log.info("%s: tagging %s with %s", input_path,
             "every word" if retag or missing == total else f"the {missing} untagged words", path)
    return load_tagger(path, map_location=resolve_device(device))
