"""``parser-predict`` (or ``python -m parser.cli.predict``): tag (when needed) and parse a file with
trained checkpoints.

    parser-predict checkpoint=outputs/quickstart/<time>/checkpoints/best.pt \\
        input=sentences.conllu output=parsed.conllu
    parser-predict checkpoint=.../best.pt tagger=outputs/tagger/en_ewt/<time>/checkpoints/best.pt \\
        input=sentences.txt output=parsed.conllu

The input is CoNLL-U (HEAD/DEPREL may be ``_`` or filled: they are replaced) or plain text with
one whitespace-tokenised sentence per line (``format=text``, or any file not ending in
``.conllu``); text that does not look tokenised (``good.``, ``can't``) is refused, naming the line.
Raw text (paragraphs separated by blank lines) needs ``tokenizer=`` (a checkpoint of
``parser-train-tokenizer``), which tokenises and splits it into sentences first. The output is CoNLL-U with HEAD and DEPREL filled and every other column, comment,
multiword token and empty node kept byte for byte. Every sentence is parsed, however long.

UPOS: a parser trained with UPOS input (``model.use_upos=true``, or the log-linear scorer) needs
tags. When the input has none (text, or a UPOS column of ``_`` only), ``tagger=`` (a checkpoint
of ``parser-train-tagger``) tags it first and the tags are written into the UPOS
column; without ``tagger=`` that is an error. ``retag=true`` replaces the input's UPOS by the
tagger's. When only some words have ``_``, ``tagger=`` fills those and keeps the others (without
it they are read as unknown tags, with a warning). A parser without UPOS input needs no tags
(with ``tagger=`` the UPOS column is still filled).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from parser.cli.shell import parse_bool, run_key_value_cli
from parser.inference import predict_file
from parser.pipeline import parse_raw_file, refuse_untokenised

__all__ = ["OPTIONS", "decoder_overrides", "main", "tag_list"]

OPTIONS = {
    "checkpoint": None,
    "input": None,
    "output": None,
    "format": "auto",  # auto | conllu | text
    "tokenizer": None,  # tokenizer checkpoint (parser-train-tokenizer): the input is raw text
    "tagger": None,  # UPOS tagger checkpoint, for input without tags (or retag=true)
    "retag": "false",  # true: replace the input's UPOS by the tagger's
    "device": "auto",
    "tokens_per_batch": "5000",
    "on_invalid": "error",  # error | skip: malformed CoNLL-U sentences
    "projective": None,  # true | false: best projective tree or maximum spanning tree (default: the checkpoint's)
    "attach_to_units": None,  # e.g. PUNCT,CCONJ, or none: UD punct/cc re-attachment (default: the checkpoint's)
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(
        argv, prog="parser-predict", doc=__doc__, defaults=OPTIONS,
        required=("checkpoint", "input", "output"), command=_run,
    )


def _run(args: dict) -> str:
    if args["tokenizer"]:
        count = parse_raw_file(
            args["checkpoint"], args["tokenizer"], args["input"], args["output"],
            tagger=args["tagger"], device=args["device"],
            tokens_per_batch=int(args["tokens_per_batch"]), **decoder_overrides(args))
        return f"parsed {count} sentences -> {args['output']}"
    refuse_untokenised(args["input"], format=args["format"])
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
