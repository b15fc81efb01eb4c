"""``parser-predict`` / ``python -m parser.predict``: parse a file with a trained checkpoint.

    parser-predict checkpoint=outputs/quickstart/<time>/checkpoints/best.pt \\
        input=sentences.conllu output=parsed.conllu

The input is CoNLL-U (HEAD/DEPREL may be ``_`` or filled: they are replaced) or plain text with
one whitespace-tokenised sentence per line (``format=text``, or any file not ending in
``.conllu``). The output is CoNLL-U with HEAD and DEPREL filled and every other column, comment,
multiword token and empty node kept byte for byte. Every sentence is parsed, however long.
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
    "device": "auto",
    "tokens_per_batch": "5000",
    "on_invalid": "error",  # error | skip: malformed CoNLL-U sentences
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
) -> int:
    """Parse ``input_path`` with the model of ``checkpoint``, write ``output_path`` (atomically).
    Returns the number of sentences written."""
    from parser.data.conllu_io import read_conllu, read_tokenized
    from parser.train.components import load_parser, resolve_device
    from parser.train.inference import log_unknown_words, parse, write_predictions
    from parser.train.user_files import input_file, output_file

    # Every path checked before the model loads; the output replaces nothing until it is whole.
    input_path = input_file(input_path, option="input")
    output_path = output_file(output_path, option="output", inputs=(input_path, checkpoint))
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
    if config.get("model", {}).get("use_upos") and all(
        tag is None for sentence in treebank.sentences for tag in sentence.upos
    ):
        log.warning("%s has no UPOS tags but the model was trained with UPOS input: expect lower "
                    "accuracy (tag the input first)", input_path)
    log_unknown_words(treebank.sentences, vocabs, name=str(input_path))
    predictions = parse(model, treebank.sentences, vocabs, tokens_per_batch=tokens_per_batch,
                        device=torch_device, score=False)
    write_predictions(treebank.sentences, predictions, output_path)
    return len(treebank.sentences)


def main(argv: Sequence[str] | None = None) -> int:
    from parser.train.cli_args import run_key_value_cli

    return run_key_value_cli(
        argv, prog="parser-predict", doc=__doc__, defaults=OPTIONS,
        required=("checkpoint", "input", "output"), command=_run,
    )


def _run(args: dict) -> str:
    count = predict_file(
        args["checkpoint"], args["input"], args["output"], format=args["format"],
        device=args["device"], tokens_per_batch=int(args["tokens_per_batch"]),
        on_invalid=args["on_invalid"],
    )
    return f"parsed {count} sentences -> {args['output']}"


if __name__ == "__main__":
    sys.exit(main())
