"""Tag (when needed) and parse a file with a trained checkpoint: the pipeline behind
``parser-predict`` and ``parser-evaluate checkpoint=...`` (see :mod:`parser.cli.predict` for the
input and output formats and the UPOS rules). The file is streamed: memory holds one chunk of
sentences, whatever the input's length."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from parser.data.conllu_stream import chunked, stream_conllu, stream_tokenized
from parser.inference.loading import load_decoder
from parser.inference.parse import (
    parse,
    reads_upos,
    report_unknown_words,
    tag_input,
    unknown_words,
    write_predictions,
)
from parser.runtime.device import bound_kernel_cache, resolve_device
from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import input_file, output_file
from parser.tagger.predict import load_tagger

__all__ = ["predict_file"]

log = logging.getLogger("parser.predict")


# Score tensors are [B, N+1, N+1, L]: a token budget alone lets the longest sentence read set the
# peak memory. Batches are also capped at this many (N+1)^2 cells per token of the budget, which
# leaves sentences of up to 39 words batched as before and splits batches of longer ones.
CELLS_PER_TOKEN = 40


def predict_file(
    checkpoint: str | Path,
    input_path: str | Path,
    output_path: str | Path,
    *,
    format: str = "auto",
    device: str = "auto",
    tokens_per_batch: int = 5000,
    on_invalid: str = "error",
    tagger: str | Path | None = None,
    retag: bool = False,
    projective: bool | None = None,
    attach_to_units: Sequence[str] | None = None,
    ud_rules: str | Sequence[str] | None = None,
    keep_deps: bool = False,
    chunk_size: int = 1000,
    confidence: bool = False,
) -> int:
    """Parse ``input_path`` with the model of ``checkpoint``, write ``output_path`` (atomically);
    ``tagger`` tags it first where UPOS is missing, or everywhere when ``retag`` (see the module
    docstring). ``projective`` overrides the checkpoint's decoder (``model.projective``): True for
    the best projective tree (Eisner), False for the maximum spanning tree; ``attach_to_units``
    overrides ``model.attach_to_units`` (UPOS tags re-attached by the UD punct/cc rule; ``[]`` for
    none); ``ud_rules`` overrides ``model.ud_rules`` (:mod:`parser.models.ud_rules`). DEPS becomes ``_`` (it would contradict the new heads) unless ``keep_deps``. The input
    is read twice, checked then parsed ``chunk_size`` sentences at a time, so memory does not grow
    with its length. ``confidence``: the tree CRF's marginals of each word's head and relation in
    MISC and the tree's log-probability, entropy and expected correct heads as comments
    (:mod:`parser.inference.confidence`). Returns the number of sentences written."""
    bound_kernel_cache()
    # Every path checked before the model loads; the output replaces nothing until it is whole.
    input_path = input_file(input_path, option="input")
    if tagger is not None:
        tagger = input_file(tagger, option="tagger")
    elif retag:
        raise ValueError("retag=true: give the tagger to tag with (tagger=<tagger best.pt>)")
    output_path = output_file(output_path, option="output",
                              inputs=(input_path, checkpoint, *([tagger] if tagger else [])))
    if format not in ("auto", "conllu", "text"):
        raise ValueError(f"format={format!r}: expected auto, conllu or text")
    if on_invalid not in ("error", "skip"):
        raise ValueError(f"on_invalid={on_invalid!r}: expected error or skip")
    is_conllu = format == "conllu" or (format == "auto" and input_path.suffix in (".conllu", ".conll"))

    def sentences(*, report: bool):  # read anew on each call, one sentence at a time
        if is_conllu:
            return stream_conllu(input_path, on_invalid="raise" if on_invalid == "error" else "skip",
                                 require_trees=False, report=report)
        return stream_tokenized(input_path)

    # First pass: the whole input checked (a bad line fails now, before the model loads) and
    # its UPOS counted; nothing kept.
    missing, total, count = 0, 0, 0
    for sentence in sentences(report=True):
        count += 1
        total += len(sentence)
        missing += sum(tag is None for tag in sentence.upos)
    torch_device = resolve_device(device)
    model, vocabs, config = load_decoder(checkpoint, device=torch_device, projective=projective,
                                         attach_to_units=attach_to_units, ud_rules=ud_rules)
    if tagger is None and missing and reads_upos(config):
        if missing == total:
            raise ValueError(
                f"input={input_path}: has no UPOS tags (text, or a UPOS column of '_' only) and the "
                f"parser {checkpoint} was trained with UPOS input: pass tagger=<tagger best.pt> to "
                "tag it first (parser-train-tagger trains one)"
            )
        log.warning("%s: %d of %d words have no UPOS ('_') and no tagger= was given: they are "
                    "read as unknown tags", input_path, missing, total)
    trained_tagger = None
    if tagger is not None and (retag or missing):
        log.info("%s: tagging %s with %s", input_path,
                 "every word" if retag or missing == total else f"the {missing} untagged words",
                 tagger)
        trained_tagger = load_tagger(tagger, map_location=torch_device)
    elif tagger is not None:
        log.info("%s: every word has a UPOS tag; tagger= not used (retag=true to replace them)",
                 input_path)
    # Second pass: read, tag, parse and write chunk by chunk, in input order; the output
    # replaces nothing until it is whole (atomic write).
    unknown = 0
    with atomic_write(output_path) as out:
        for chunk in chunked(sentences(report=False), chunk_size):
            words, upos = chunk, None
            if trained_tagger is not None:
                words, upos = tag_input(chunk, trained_tagger, retag=retag,
                                        tokens_per_batch=tokens_per_batch)
            unknown += unknown_words(words, vocabs)[0]
            predictions = parse(model, words, vocabs, tokens_per_batch=tokens_per_batch,
                                cells_per_batch=CELLS_PER_TOKEN * tokens_per_batch,
                                device=torch_device, score=False, confidence=confidence)
            write_predictions(chunk, predictions, out, upos=upos, keep_deps=keep_deps)
    report_unknown_words(unknown, total, name=str(input_path))
    return count
