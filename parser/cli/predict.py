"""``parser-predict`` (or ``python -m parser.cli.predict``): tag (when needed) and parse a file with
trained checkpoints.

    parser-predict checkpoint=outputs/quickstart/<time>/checkpoints/best.pt \\
        input=sentences.conllu output=parsed.conllu
    parser-predict checkpoint=.../best.pt tagger=outputs/tagger/en_ewt/<time>/checkpoints/best.pt \\
        input=sentences.txt output=parsed.conllu
    parser-predict pipeline=en.pipeline input=raw.txt output=parsed.conllu kbest=3
    zcat raw.txt.gz | parser-predict checkpoint=en.pipeline input=- output=- > parsed.conllu

The input is CoNLL-U (HEAD/DEPREL may be ``_`` or filled: they are replaced) or plain text with
one whitespace-tokenised sentence per line (``format=text``, or any file not ending in
``.conllu``); text that does not look tokenised (``good.``, ``can't``) is refused, naming the line.
Raw text (paragraphs separated by blank lines) needs ``tokenizer=`` (a checkpoint of
``parser-train-tokenizer``), which tokenises and splits it into sentences first, or a pipeline
file (``parser-pipeline build``: tokenizer, tagger and parser in one) given as ``pipeline=`` or as
a ``checkpoint=`` ending in ``.pipeline``; with a pipeline, an input not ending in ``.conllu`` is
raw text (``format=raw``; ``format=text`` reads one tokenised sentence per line). Every option
below works on every input kind. ``input=-`` reads standard input, ``output=-`` writes standard
output (the summary then goes to standard error); an input ending in ``.gz``, ``.bz2`` or ``.xz`` is
decompressed as it is read. The output is
CoNLL-U with HEAD and DEPREL filled and every other column, comment, multiword token and empty
node kept byte for byte, except the enhanced graph: it was built on the input's heads, so DEPS
becomes ``_`` and empty nodes are dropped (``keep_deps=true`` keeps both). Every sentence is
parsed, however long; the file is read, parsed and written ``chunk_size`` sentences at a time,
so memory does not grow with its length.

UPOS: a parser trained with UPOS input (``model.use_upos=true``, or the log-linear scorer) needs
tags. When the input has none (text, or a UPOS column of ``_`` only), ``tagger=`` (a checkpoint
of ``parser-train-tagger``) tags it first and the tags are written into the UPOS
column; without ``tagger=`` that is an error. ``retag=true`` replaces the input's UPOS by the
tagger's. When only some words have ``_``, ``tagger=`` fills those and keeps the others (without
it they are read as unknown tags, with a warning). A parser without UPOS input needs no tags
(with ``tagger=`` the UPOS column is still filled).

Confidence: ``confidence=true`` adds, from the model's tree CRF, each word's marginal probability
of the head written and of its relation given that head to MISC (``HeadProb=0.9700|DeprelProb=
0.9100``, beside what MISC holds) and per sentence the comments ``# tree_logprob``, ``#
tree_entropy`` and ``# expected_correct`` (the sum of the written arcs' marginals).

Alternatives (only a tree CRF gives them; :mod:`parser.inference.alternatives`, output format
:mod:`parser.inference.write_trees`):

    parser-predict checkpoint=.../best.pt input=in.conllu output=kbest.conllu kbest=5
    parser-predict checkpoint=.../best.pt input=in.conllu output=samples.conllu samples=10 seed=1
    parser-predict checkpoint=.../best.pt input=partial.conllu output=rest.conllu keep_heads=given

``kbest=K``: the K most probable trees of each sentence, best first, each written as the whole
sentence with ``# tree_rank = r``, ``# tree_prob = p`` and ``# sent_id = <sent_id>/r`` (fewer
blocks for a sentence with fewer trees). ``samples=K seed=S``: K trees drawn exactly from the
model's distribution, written alike with ``# sample = i``; the same seed gives the same samples
whatever the batching. ``keep_heads=given``: every word whose HEAD the input gives keeps it (and
its DEPREL, when given) and the other words are parsed: the best tree, the k best or the samples
of the distribution restricted to trees with the given arcs, and the ``confidence=true``
marginals under it (1 on the kept arcs). A sentence whose given heads admit no tree (a cycle,
several roots, a head out of range, or arcs the model's UD rules forbid) is written as read with
``# parse_error = ...`` naming the words, a warning names it, and the others are parsed.
``kbest`` and ``samples`` exclude each other.

One sentence never costs the file: a sentence that cannot be parsed under the options (fixed
arcs that admit no tree, more than ``max_words`` words, a parse that fails) is written as read
with ``# parse_error = <reason>``, a warning names it (sentence id and line), and the others are
parsed. The summary then says how many: ``parsed N sentences, K failed (# parse_error) ->
out.conllu``, and the exit status is 3 (the output is whole; 0: every sentence parsed; 2: bad
input or options, nothing written). ``max_words`` (default 1000) bounds the memory and time of
one tree (1,000 words: about 20 s and 0.8 GB on one CPU thread). Malformed CoNLL-U (a HEAD that is
not a word index of its sentence, of any length, among others) is bad input: ``file:line:``
error and status 2, unless ``on_invalid=skip``, which leaves such sentences out.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from parser.cli.local_files import STDIO, local_input, local_output
from parser.cli.shell import parse_bool, run_key_value_cli
from parser.inference import ParseCount, predict_file
from parser.inference.options import PredictOptions
from parser.pipeline import Pipeline, parse_raw_file, refuse_untokenised
from parser.runtime.user_files import input_file, output_file

__all__ = ["OPTIONS", "PARTIAL", "decoder_overrides", "main", "tag_list"]

PARTIAL = 3  # exit status: the output is whole but some sentences are written with # parse_error

OPTIONS = {
    "checkpoint": None,  # a parser checkpoint, or a pipeline file (*.pipeline)
    "pipeline": None,  # a pipeline file (parser-pipeline build): tokenizer, tagger and parser
    "input": None,  # a file (.gz, .bz2, .xz: decompressed), or - for standard input
    "output": None,  # a file, or - for standard output
    "format": "auto",  # auto | conllu | text | raw (raw: with a pipeline or tokenizer=)
    "tokenizer": None,  # tokenizer checkpoint (parser-train-tokenizer): the input is raw text
    "tagger": None,  # UPOS tagger checkpoint, for input without tags (or retag=true)
    "retag": "false",  # true: replace the input's UPOS by the tagger's
    "device": "auto",
    "tokens_per_batch": "5000",
    "on_invalid": "error",  # error | skip: malformed CoNLL-U sentences
    "projective": None,  # true | false: best projective tree or maximum spanning tree (default: the checkpoint's)
    "attach_to_units": None,  # e.g. PUNCT,CCONJ, or none: UD punct/cc re-attachment (default: the checkpoint's)
    "ud_rules": None,  # all | none | root,left_to_right,one_subject,one_object (default: the checkpoint's model.ud_rules)
    "label_grid": None,  # false: labels scored on the decoded arcs only (default: the checkpoint's model.label_grid)
    "keep_deps": "false",  # true: keep the input's DEPS column (default: '_', as HEAD is new)
    "chunk_size": "1000",  # sentences read, parsed and written at a time (bounds memory)
    "confidence": "false",  # true: HeadProb/DeprelProb in MISC, tree_logprob/tree_entropy/expected_correct comments
    "kbest": "0",  # K > 0: the K best trees per sentence (# tree_rank, # tree_prob)
    "samples": "0",  # K > 0: K trees sampled per sentence (# sample, # tree_prob), with seed=
    "seed": "0",  # the samples' seed (per sentence: batching does not change them)
    "keep_heads": "none",  # given: keep the input's HEAD (and DEPREL) where given, parse the rest
    "keep_columns": "none",  # given: keep the input's LEMMA/UPOS/XPOS/FEATS where given (else predicted, or '_')
    "max_words": "1000",  # longer sentences are not parsed: written as read with # parse_error
}


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    data = sys.stdout  # output=-: the parse goes here, every message to standard error
    failed: list[int] = []  # sentences written with # parse_error (set by _run)
    with contextlib.redirect_stdout(sys.stderr if f"output={STDIO}" in arguments else sys.stdout):
        status = run_key_value_cli(
            arguments, prog="parser-predict", doc=__doc__, defaults=OPTIONS,
            required=("input", "output"), command=lambda args: _run(args, stdout=data, failed=failed),
        )
    return PARTIAL if status == 0 and sum(failed) else status


def _run(args: dict, *, stdout: IO[str], failed: list[int]) -> str:
    pipeline = args["pipeline"] or (args["checkpoint"] if str(args["checkpoint"]).endswith(
        ".pipeline") else None)
    if not pipeline and not args["checkpoint"]:
        raise ValueError("give checkpoint=<parser best.pt> or pipeline=<file>")
    if pipeline and args["tokenizer"]:
        raise ValueError("tokenizer=: a pipeline file has its own tokenizer")
    options = PredictOptions.from_strings(args)  # the request: every key=value but the files
    with local_input(args["input"], format=args["format"]) as input_path, \
            local_output(args["output"], stdout=stdout) as output_path:
        if pipeline:
            count = _parse_with_pipeline(pipeline, input_path, output_path, args, options)
        elif args["tokenizer"]:
            count = parse_raw_file(args["checkpoint"], args["tokenizer"], input_path, output_path,
                                   options, tagger=args["tagger"])
        else:
            if options.format == "raw":
                raise ValueError("format=raw: raw text needs pipeline=<file> or tokenizer=<checkpoint>")
            refuse_untokenised(input_path, format=options.format)
            count = predict_file(args["checkpoint"], input_path, output_path, options,
                                 tagger=args["tagger"])
    failed.append(count.failed)
    if count.failed:
        return f"parsed {count} sentences, {count.failed} failed (# parse_error) -> {args['output']}"
    return f"parsed {count} sentences -> {args['output']}"


def _parse_with_pipeline(path: str, input_path: Path, output_path: Path, args: dict,
                         options: PredictOptions) -> ParseCount:
    """``pipeline=``: raw text (or ``format=text`` / CoNLL-U) through the pipeline file."""
    for option in ("tagger", "checkpoint" if args["pipeline"] else "pipeline"):
        if args[option]:
            raise ValueError(f"{option}=: the pipeline file {path} holds its own; drop {option}=")
    if options.format == "auto":
        options = options.replace(
            format="conllu" if input_path.suffix in (".conllu", ".conll") else "raw")
    nlp = Pipeline.load(input_file(path, option="pipeline"), options, device=options.device)
    output_path = output_file(output_path, option="output", inputs=(input_path, Path(path)))
    return nlp.parse_file(input_file(input_path, option="input"), output_path)


def decoder_overrides(args: dict) -> dict:
    """``projective=``, ``attach_to_units=``, ``ud_rules=`` and ``label_grid=`` of a CLI as ``predict_file`` keywords
    (None: keep the checkpoint's setting)."""
    projective, label_grid = args["projective"], args.get("label_grid")
    return {
        "projective": None if projective is None else parse_bool(projective, option="projective"),
        "attach_to_units": tag_list(args["attach_to_units"]),
        "ud_rules": args.get("ud_rules"),
        "label_grid": None if label_grid is None else parse_bool(label_grid, option="label_grid"),
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
