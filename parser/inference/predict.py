"""Tag (when needed) and parse a file with a trained checkpoint: the pipeline behind
``parser-predict`` and ``parser-evaluate checkpoint=...`` (see :mod:`parser.cli.predict` for the
input and output formats and the UPOS rules)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from parser.data.conllu_io import read_conllu, read_tokenized
from parser.inference.loading import load_parser
from parser.inference.parse import (
    log_unknown_words,
    missing_upos,
    parse,
    reads_upos,
    tag_input,
    write_predictions,
)
from parser.models.parser_model import upos_ids
from parser.runtime.device import resolve_device
from parser.runtime.user_files import input_file, output_file
from parser.tagger.predict import load_tagger

__all__ = ["predict_file"]

log = logging.getLogger("parser.predict")


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
) -> int:
    """Parse ``input_path`` with the model of ``checkpoint``, write ``output_path`` (atomically);
    ``tagger`` tags it first where UPOS is missing, or everywhere when ``retag`` (see the module
    docstring). ``projective`` overrides the checkpoint's decoder (``model.projective``): True for
    the best projective tree (Eisner), False for the maximum spanning tree; ``attach_to_units``
    overrides ``model.attach_to_units`` (UPOS tags re-attached by the UD punct/cc rule; ``[]`` for
    none). Returns the number of sentences written."""
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
    if is_conllu:
        treebank = read_conllu(input_path, on_invalid="raise" if on_invalid == "error" else "skip",
                               require_trees=False)
    else:
        treebank = read_tokenized(input_path)
    torch_device = resolve_device(device)
    model, vocabs, config = load_parser(checkpoint, device=torch_device)
    if projective is not None:
        model.projective = projective
    if attach_to_units is not None:
        model.unit_tags = upos_ids(list(attach_to_units), vocabs.upos, option="attach_to_units")
    sentences, upos = treebank.sentences, None
    missing, total = missing_upos(sentences)
    if tagger is None and missing and reads_upos(config):
        if missing == total:
            raise ValueError(
                f"input={input_path}: has no UPOS tags (text, or a UPOS column of '_' only) and the "
                f"parser {checkpoint} was trained with UPOS input: pass tagger=<tagger best.pt> to "
                "tag it first (parser-train-tagger trains one)"
            )
        log.warning("%s: %d of %d words have no UPOS ('_') and no tagger= was given: they are "
                    "read as unknown tags", input_path, missing, total)
    if tagger is not None and (retag or missing):
        log.info("%s: tagging %s with %s", input_path,
                 "every word" if retag or missing == total else f"the {missing} untagged words",
                 tagger)
        sentences, upos = tag_input(sentences, load_tagger(tagger, map_location=torch_device),
                                    retag=retag, tokens_per_batch=tokens_per_batch)
    elif tagger is not None:
        log.info("%s: every word has a UPOS tag; tagger= not used (retag=true to replace them)",
                 input_path)
    log_unknown_words(sentences, vocabs, name=str(input_path))
    predictions = parse(model, sentences, vocabs, tokens_per_batch=tokens_per_batch,
                        device=torch_device, score=False)
    write_predictions(treebank.sentences, predictions, output_path, upos=upos)
    return len(sentences)
