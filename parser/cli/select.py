"""``parser-select`` (or ``python -m parser.cli.select``): choose what to annotate next from a pool
of unannotated sentences, by the tree CRF's uncertainty, and write the file annotators fill in.

    parser-select checkpoint=run/checkpoints/best.pt pool=pool.conllu output=batch1.conllu \\
        strategy=words budget=2000 cap=3
    parser-select pipeline=en.pipeline pool=raw.txt output=batch1.conllu strategy=entropy budget=200 unit=sentences

``pool=``: CoNLL-U (its HEAD/DEPREL, if any, are ignored unless ``keep_heads=given``), one
tokenised sentence per line
(``format=text``, or any file not ending in ``.conllu``), or raw text with a pipeline file
(``format=raw``, the default for text with ``pipeline=``) or ``tokenizer=``. The pool is read twice,
streamed: memory holds one chunk (``chunk_size``) and the candidates, not the pool.

``strategy=``: ``entropy`` (whole sentences by tree entropy), ``errors`` (whole sentences by the
expected number of wrong heads in the parser's tree), ``words`` (single words by the marginal
probability of their head: partial annotation), ``random`` (whole sentences) or ``random_words``
(``seed=``). ``normalise=true`` (default) divides a sentence's entropy or expected errors by its
words. ``budget=N`` units of ``unit=words`` (default) or ``unit=sentences`` (whole-sentence
strategies). ``cap=K``: at most K words of one sentence (word strategies); sentence strategies pass
over sentences of more than K words. ``stratify=length``: the budget shared among sentence lengths
(1-10, 11-20, 21-30, 31-40, 41+ words) as the pool has them, each share filled by the strategy.
docs/annotation.md explains each choice.

``output=``: the annotation file, the selected sentences in pool order: the parser's tree on every
word but the selected ones, whose HEAD and DEPREL are ``_`` (the parser's guess in MISC
``PredHead``/``PredDeprel``); ``HeadProb`` (and ``DeprelProb``) in every word's MISC; the comments
``# pool_position``, ``# selected_words`` (word strategies), ``# select_order`` and
``# select_score``. ``ranked=`` (default ``<output without .conllu>.ranked.tsv``): the selection,
best first (``rank``, ``sent_id``, ``word`` or ``*``, ``score``, ``pool_position``).
``remainder=``: the pool's sentences not selected whole, as CoNLL-U (unlabeled text for
self-training). Train on the filled-in file with ``data.partial_trees=true``.

``keep_heads=given`` (word strategies, a CoNLL-U pool): the heads the pool gives are annotation,
as in an annotation file filled in and put back in the pool: kept in the pre-filled tree, never
asked again, and every other word scored by its marginal under the tree CRF restricted to them.

A pool sentence that cannot be read (malformed CoNLL-U) is skipped and counted, the first named
by file and line, up to ``max_invalid`` (then the command stops, exit status 2); a sentence of more
than ``max_words`` words is never selected. ``tagger=``: UPOS for a pool without tags (a parser
that reads UPOS); ``projective=``, ``attach_to_units=``, ``ud_rules=``, ``label_grid=``: the decoder's
overrides, as for parser-predict, except that ``strategy=words`` selects with ``ud_rules=none``
unless ``ud_rules=`` is given (:func:`selection_decoder` says why).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from parser.cli.predict import decoder_overrides
from parser.cli.shell import UsageError, parse_bool, run_key_value_cli
from parser.data.conllu_io import Sentence
from parser.data.text_files import open_text
from parser.inference import Annotator
from parser.inference.options import PredictOptions
from parser.inference.select_pool import Pool, select_pool
from parser.inference.selection import SelectOptions
from parser.pipeline import Pipeline, read_paragraph_stream, refuse_untokenised
from parser.runtime.device import bound_kernel_cache, resolve_device
from parser.runtime.user_files import input_file, output_file
from parser.tagger.predict import load_tagger
from parser.tokenize import iter_sentences, load_tokenizer

__all__ = ["OPTIONS", "main", "selection_decoder"]

OPTIONS = {
    "checkpoint": None,  # a parser checkpoint, or a pipeline file (*.pipeline)
    "pipeline": None,  # a pipeline file (parser-pipeline build): tokenizer, tagger and parser
    "pool": None,  # the sentences to choose from: CoNLL-U, tokenised text or raw text
    "output": None,  # the annotation file (CoNLL-U)
    "ranked": None,  # the ranked list (TSV); default <output stem>.ranked.tsv
    "remainder": None,  # the pool's sentences not selected whole (CoNLL-U), when given
    "strategy": "entropy",  # entropy | errors | words | random | random_words
    "budget": None,  # units to select (required)
    "unit": "words",  # words | sentences (whole-sentence strategies)
    "cap": None,  # at most this many words of one sentence
    "normalise": "true",  # entropy and errors per word of the sentence
    "seed": "0",  # the random strategies' seed
    "stratify": "none",  # none | length (the budget shared among sentence lengths as in the pool)
    "format": "auto",  # auto | conllu | text | raw (raw: with a pipeline or tokenizer=)
    "tokenizer": None,  # tokenizer checkpoint (parser-train-tokenizer): the pool is raw text
    "tagger": None,  # UPOS tagger checkpoint, for a pool without tags
    "device": "auto",
    "tokens_per_batch": "5000",
    "chunk_size": "1000",  # sentences parsed at a time (bounds memory)
    "max_words": "1000",  # longer sentences are not parsed, never selected
    "max_invalid": "1000",  # unreadable pool sentences skipped before the command stops
    "projective": None,
    "attach_to_units": None,
    "keep_heads": "none",  # given: the pool's heads are annotation (kept, never asked again)
    "ud_rules": None,  # default: the checkpoint's, none for strategy=words
    "label_grid": None,
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(argv, prog="parser-select", doc=__doc__, defaults=OPTIONS,
                             required=("pool", "output", "budget"), command=_run)


def _run(args: dict) -> str:
    bound_kernel_cache()
    options = SelectOptions(
        strategy=str(args["strategy"]), budget=_number(args["budget"], option="budget"),
        unit=str(args["unit"]),
        cap=None if args["cap"] in (None, "none") else _number(args["cap"], option="cap"),
        normalise=parse_bool(args["normalise"], option="normalise"),
        seed=_number(args["seed"], option="seed", least=0), stratify=str(args["stratify"]))
    pipeline = args["pipeline"] or (args["checkpoint"] if str(args["checkpoint"]).endswith(
        ".pipeline") else None)
    if not pipeline and not args["checkpoint"]:
        raise UsageError("give checkpoint=<parser best.pt> or pipeline=<file>")
    pool_path = input_file(args["pool"], option="pool")
    output = output_file(args["output"], option="output", inputs=(pool_path,))
    ranked = output_file(args["ranked"] or output.with_suffix(".ranked.tsv"), option="ranked",
                         inputs=(pool_path, output))
    remainder = None if not args["remainder"] else output_file(
        args["remainder"], option="remainder", inputs=(pool_path, output))
    format = args["format"]
    if format == "auto":
        format = ("conllu" if pool_path.suffix in (".conllu", ".conll")
                  else "raw" if pipeline or args["tokenizer"] else "text")
    if format not in ("conllu", "text", "raw"):
        raise UsageError(f"format={format}: expected auto, conllu, text or raw")
    if args["keep_heads"] not in ("none", "given"):
        raise UsageError(f"keep_heads={args['keep_heads']}: expected none or given")
    if args["keep_heads"] == "given" and (format != "conllu" or options.strategy not in
                                          ("words", "random_words")):
        raise UsageError("keep_heads=given: the pool's heads are read from CoNLL-U and kept by "
                         "word strategies (strategy=words or random_words); a whole sentence "
                         "would ask again for them")
    annotator, tokenizer = _annotator(args, pipeline=pipeline, name=str(pool_path))
    if format == "raw":
        if tokenizer is None:
            raise UsageError("format=raw: raw text needs pipeline=<file> or tokenizer=<checkpoint>")
        pool = _RawPool(pool_path, tokenizer)
    else:
        if format == "text":
            refuse_untokenised(pool_path, format="text")
        pool = Pool(pool_path, format=format,
                    max_invalid=_number(args["max_invalid"], option="max_invalid", least=0))
    report = select_pool(annotator, pool, options, output, ranked=ranked, remainder=remainder,
                         chunk_size=_number(args["chunk_size"], option="chunk_size"))
    text = report.summary(options, args["output"]) + f"; ranked list -> {ranked}"
    return text + (f"; remainder -> {remainder}" if remainder is not None else "")


def selection_decoder(args: dict) -> dict:
    """The decoder overrides of a selection (:func:`parser.cli.predict.decoder_overrides`), with
    ``ud_rules=none`` for ``strategy=words`` unless ``ud_rules=`` is given: a word is then scored
    by the marginal of its head in the model's own tree. With the UD rules, the heads they force
    where the model puts almost no probability (mostly punctuation) score highest and took the
    whole budget on a large pool, teaching little (experiments/results/annotation_sim.md: on
    en_ewt, hu_szeged and af_afribooms the selection without rules ended above the one with
    them); annotators then see the model's maximum spanning tree as context.

    >>> selection_decoder({"strategy": "words", "ud_rules": None, "projective": None,
    ...                    "attach_to_units": None})["ud_rules"]
    'none'
    """
    overrides = decoder_overrides(args)
    if overrides["ud_rules"] is None and args["strategy"] == "words":
        overrides["ud_rules"] = "none"
    return overrides


def _annotator(args: dict, *, pipeline: str | None, name: str):
    """``(Annotator with confidence, tokenizer or None)`` of ``pipeline=`` or ``checkpoint=``."""
    overrides = selection_decoder(args)
    common = {"max_words": _number(args["max_words"], option="max_words")}
    tokens = _number(args["tokens_per_batch"], option="tokens_per_batch")
    options = PredictOptions(device=args["device"], confidence=True, keep_columns="given",
                             keep_heads=args["keep_heads"], tokens_per_batch=tokens,
                             **common, **overrides)
    if pipeline:
        for option in ("tagger", "tokenizer", "checkpoint" if args["pipeline"] else "pipeline"):
            if args[option]:
                raise UsageError(f"{option}=: the pipeline file {pipeline} holds its own; drop it")
        nlp = Pipeline.load(input_file(pipeline, option="pipeline"), options,
                            device=args["device"])
        return nlp.annotator(options, name=name), nlp.tokenizer
    device = resolve_device(args["device"])
    tagger = None if not args["tagger"] else load_tagger(
        input_file(args["tagger"], option="tagger"), map_location=device)
    annotator = Annotator.load(input_file(args["checkpoint"], option="checkpoint"), options,
                               tagger=tagger, name=name)
    tokenizer = None if not args["tokenizer"] else load_tokenizer(
        input_file(args["tokenizer"], option="tokenizer"), device=device)
    return annotator, tokenizer


class _RawPool:
    """A raw text pool (paragraphs separated by blank lines), tokenised and split anew on each
    pass by the same tokenizer (the same sentences each time)."""

    def __init__(self, path: Path, tokenizer) -> None:
        self.path, self.tokenizer = path, tokenizer

    def __call__(self) -> Iterator[Sentence]:
        with open_text(self.path) as lines:
            yield from iter_sentences(self.tokenizer, read_paragraph_stream(lines),
                                      path=str(self.path))


def _number(value: str | None, *, option: str, least: int = 1) -> int:
    """``"5"`` -> 5; not an integer, or under ``least``: UsageError naming ``option``.

    >>> _number("0", option="budget")
    Traceback (most recent call last):
    ...
    parser.cli.shell.UsageError: budget=0: expected an integer >= 1
    """
    try:
        number = int(str(value))
    except ValueError:
        number = least - 1
    if number < least:
        raise UsageError(f"{option}={value}: expected an integer >= {least}")
    return number


if __name__ == "__main__":
    sys.exit(main())
