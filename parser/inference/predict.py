"""Tag (when needed) and parse a file with a trained checkpoint: the pipeline behind
``parser-predict`` and ``parser-evaluate checkpoint=...`` (see :mod:`parser.cli.predict` for the
input and output formats and the UPOS rules). The file is streamed: memory holds one chunk of
sentences, whatever the input's length."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from parser.data.conllu_io import Sentence
from parser.data.conllu_stream import chunked, stream_conllu, stream_tokenized
from parser.inference.alternatives import parse_alternatives
from parser.inference.fixed_arcs import given_heads
from parser.inference.loading import load_decoder
from parser.inference.parse import (
    parse,
    reads_upos,
    report_unknown_words,
    tag_input,
    unknown_words,
    write_predictions,
)
from parser.inference.write_trees import tree_blocks
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
    kbest: int = 0,
    samples: int = 0,
    seed: int = 0,
    keep_heads: str = "none",
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
    (:mod:`parser.inference.confidence`). ``kbest``: the k best trees of each sentence;
    ``samples`` (with ``seed``): trees sampled from the model; ``keep_heads="given"``: the input's
    annotated heads (and their relations) kept, the other words parsed (:mod:`.alternatives`,
    output format: :mod:`.write_trees`); a sentence whose given heads admit no tree is written
    as read with ``# parse_error``, and counted in a warning. Returns the number of sentences
    read."""
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
    if keep_heads not in ("none", "given"):
        raise ValueError(f"keep_heads={keep_heads!r}: expected none or given")
    if kbest < 0 or samples < 0 or (kbest and samples):
        raise ValueError(f"kbest={kbest}, samples={samples}: expected one of them (>= 1), or neither")
    alternatives = bool(kbest or samples or keep_heads == "given")
    is_conllu = format == "conllu" or (format == "auto" and input_path.suffix in (".conllu", ".conll"))

    def sentences(*, report: bool):  # read anew on each call, one sentence at a time
        if is_conllu:
            return stream_conllu(input_path, on_invalid="raise" if on_invalid == "error" else "skip",
                                 require_trees=False, report=report,
                                 check_heads=keep_heads != "given")  # reported per sentence
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
    unknown = position = refused = 0
    with atomic_write(output_path) as out:
        for chunk in chunked(sentences(report=False), chunk_size):
            words, upos = chunk, None
            if trained_tagger is not None:
                words, upos = tag_input(chunk, trained_tagger, retag=retag,
                                        tokens_per_batch=tokens_per_batch)
            unknown += unknown_words(words, vocabs)[0]
            if alternatives:
                refused += _write_alternatives(
                    model, chunk, words, vocabs, out, upos=upos, position=position,
                    tokens_per_batch=tokens_per_batch, device=torch_device, kbest=kbest,
                    samples=samples, seed=seed, keep_heads=keep_heads, confidence=confidence,
                    keep_deps=keep_deps, name=str(input_path))
                position += len(chunk)
                continue
            predictions = parse(model, words, vocabs, tokens_per_batch=tokens_per_batch,
                                cells_per_batch=CELLS_PER_TOKEN * tokens_per_batch,
                                device=torch_device, score=False, confidence=confidence)
            write_predictions(chunk, predictions, out, upos=upos, keep_deps=keep_deps)
    report_unknown_words(unknown, total, name=str(input_path))
    if refused:
        log.warning("%s: %d of %d sentences refused (their given heads admit no tree): written as "
                    "read, with a '# parse_error' comment", input_path, refused, count)
    return count


def _write_alternatives(model, chunk: list[Sentence], words: list[Sentence], vocabs, out, *,
                        upos, position: int, tokens_per_batch: int, device, kbest: int,
                        samples: int, seed: int, keep_heads: str, confidence: bool,
                        keep_deps: bool, name: str) -> int:
    """Parse and write one chunk with :func:`parse_alternatives`; returns the sentences refused."""
    constraints = [given_heads(s) for s in chunk] if keep_heads == "given" else None
    entries = parse_alternatives(
        model, words, vocabs, tokens_per_batch=tokens_per_batch,
        cells_per_batch=CELLS_PER_TOKEN * tokens_per_batch, device=device, kbest=kbest,
        samples=samples, seed=seed, constraints=constraints, confidence=confidence,
        first_position=position)
    mode = "kbest" if kbest else "samples" if samples else "best"
    refused = 0
    for j, (sentence, entry) in enumerate(zip(chunk, entries)):
        if entry.error is not None:
            refused += 1
            log.warning("%s: sentence %s (line %d): keep_heads=given refused: %s", name,
                        sentence.sent_id or position + j + 1, sentence.line, entry.error)
        for block in tree_blocks(sentence, entry, position=position + j, mode=mode,
                                 upos=None if upos is None else upos[j], keep_deps=keep_deps):
            out.write(block)
    return refused
