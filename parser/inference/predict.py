"""``parser-predict`` / ``python -m parser.predict``: tag (when needed) and parse a file with
trained checkpoints.

    parser-predict checkpoint=outputs/quickstart/<time>/checkpoints/best.pt \\
        input=sentences.conllu output=parsed.conllu
    parser-predict checkpoint=.../best.pt tagger=outputs/tagger/en_ewt/<time>/checkpoints/best.pt \\
        input=sentences.txt output=parsed.conllu

The input is CoNLL-U (HEAD/DEPREL may be ``_`` or filled: they are replaced) or plain text with
one whitespace-tokenised sentence per line (``format=text``, or any file not ending in
``.conllu``). The output is CoNLL-U with HEAD and DEPREL filled and every other column, comment,
multiword token and empty node kept byte for byte. Every sentence is parsed, however long.

UPOS: a parser trained with UPOS input (``model.use_upos=true``, or the log-linear scorer) needs
tags. When the input has none (text, or a UPOS column of ``_`` only), ``tagger=`` (a checkpoint
of ``python -m parser.tagger.train``) tags it first and the tags are written into the UPOS
column; without ``tagger=`` that is an error. ``retag=true`` replaces the input's UPOS by the
tagger's. When only some words have ``_``, ``tagger=`` fills those and keeps the others (without
it they are read as unknown tags, with a warning). A parser without UPOS input needs no tags
(with ``tagger=`` the UPOS column is still filled).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "predict_file"]

log = logging.getLogger("parser.predict")

OPTIONS = {
    "checkpoint": None,
    "input": None,
    "output": None,
    "format": "auto",  # auto | conllu | text
    "tagger": None,  # UPOS tagger checkpoint, for input without tags (or retag=true)
    "retag": "false",  # true: replace the input's UPOS by the tagger's
    "device": "auto",
    "tokens_per_batch": "5000",
    "on_invalid": "error",  # error | skip: malformed CoNLL-U sentences
    "projective": None,  # true | false: best projective tree or maximum spanning tree (default: the checkpoint's)
    "attach_to_units": None,  # e.g. PUNCT,CCONJ, or none: UD punct/cc re-attachment (default: the checkpoint's)
}


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
    from parser.data.conllu_io import read_conllu, read_tokenized
    from parser.train.components import load_parser, resolve_device
    from parser.train.inference import (
        log_unknown_words,
        missing_upos,
        parse,
        reads_upos,
        tag_input,
        write_predictions,
    )
    from parser.train.user_files import input_file, output_file

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
        from parser.train.model import upos_ids

        model.unit_tags = upos_ids(list(attach_to_units), vocabs.upos, option="attach_to_units")
    sentences, upos = treebank.sentences, None
    missing, total = missing_upos(sentences)
    if tagger is None and missing and reads_upos(config):
        if missing == total:
            raise ValueError(
                f"input={input_path}: has no UPOS tags (text, or a UPOS column of '_' only) and the "
                f"parser {checkpoint} was trained with UPOS input: pass tagger=<tagger best.pt> to "
                "tag it first (python -m parser.tagger.train trains one)"
            )
        log.warning("%s: %d of %d words have no UPOS ('_') and no tagger= was given: they are "
                    "read as unknown tags", input_path, missing, total)
    if tagger is not None and (retag or missing):
        from parser.tagger.predict import load_tagger

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


def main(argv: Sequence[str] | None = None) -> int:
    from parser.train.cli_args import run_key_value_cli

    return run_key_value_cli(
        argv, prog="parser-predict", doc=__doc__, defaults=OPTIONS,
        required=("checkpoint", "input", "output"), command=_run,
    )


def _run(args: dict) -> str:
    from parser.train.cli_args import parse_bool

    count = predict_file(
        args["checkpoint"], args["input"], args["output"], format=args["format"],
        device=args["device"], tokens_per_batch=int(args["tokens_per_batch"]),
        on_invalid=args["on_invalid"], tagger=args["tagger"],
        retag=parse_bool(args["retag"], option="retag"),
        **decoder_overrides(args),
    )
    return f"parsed {count} sentences -> {args['output']}"


def decoder_overrides(args: dict) -> dict:
    """``projective=`` and ``attach_to_units=`` of a CLI as ``predict_file`` keywords (None: keep
    the checkpoint's setting)."""
    from parser.train.cli_args import parse_bool

    projective = args["projective"]
    return {
        "projective": None if projective is None else parse_bool(projective, option="projective"),
        "attach_to_units": tag_list(args["attach_to_units"]),
    }


def tag_list(value: str | None) -> list[str] | None:
    """``PUNCT,CCONJ`` -> ``["PUNCT", "CCONJ"]``; ``none`` or empty -> ``[]``; None -> None."""
    if value is None:
        return None
    if value.strip().lower() in ("", "none", "[]"):
        return []
    return [tag.strip() for tag in value.split(",") if tag.strip()]


if __name__ == "__main__":
    sys.exit(main())
