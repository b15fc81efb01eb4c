"""``parser-draw`` (or ``python -m parser.cli.draw``): pictures of the trees of a CoNLL-U file
as one standalone HTML page (inline SVG and CSS, no script, opens offline).

    parser-draw input=predicted.conllu output=trees.html
    parser-draw input=predicted.conllu output=trees.html gold=gold.conllu limit=50

Each sentence is one figure with its ``sent_id`` and text: words in order with LEMMA, UPOS and
FEATS beneath, arcs above with their relations. With ``confidence=true`` predictions (MISC
``HeadProb``, ...) each arc's colour, width and opacity show its marginal; with ``gold=`` (the
same sentences, in the same order) wrong heads and labels are red and a wrong head's gold arc
is green. ``limit=N`` draws the first N sentences. A malformed file is refused with its name and
line (the project's CoNLL-U reader); HEAD ``_`` is allowed (the word has no arc).
docs/pictures.md says what each mark means.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from parser.cli.shell import UsageError, run_key_value_cli
from parser.data.conllu_io import Sentence, read_conllu
from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import input_file, output_file
from parser.view import page_html

__all__ = ["OPTIONS", "draw", "main"]

OPTIONS = {
    "input": None,  # the CoNLL-U file to draw
    "output": None,  # the HTML page to write
    "gold": None,  # optional: gold trees of the same sentences
    "limit": None,  # optional: draw the first N sentences only
    "title": None,  # the page's title (default: the input's file name)
}


def main(argv: Sequence[str] | None = None) -> int:
    return run_key_value_cli(argv, prog="parser-draw", doc=__doc__, defaults=OPTIONS,
                             required=("input", "output"), command=_run)


def _run(args: dict) -> str:
    limit = None
    if args["limit"] is not None:
        if not args["limit"].isdigit() or int(args["limit"]) < 1:
            raise UsageError(f"limit={args['limit']}: expected a positive number of sentences")
        limit = int(args["limit"])
    count = draw(args["input"], args["output"], gold=args["gold"], limit=limit, title=args["title"])
    return f"{count} sentence(s) drawn -> {args['output']}"


def draw(input: str, output: str, *, gold: str | None = None, limit: int | None = None,
         title: str | None = None) -> int:
    """Write the page of ``input``'s trees (the first ``limit``) to ``output``, against
    ``gold`` when given; the number of sentences drawn."""
    source = input_file(input, option="input")
    inputs = [source]
    truth_path = None if gold is None else input_file(gold, option="gold")
    if truth_path is not None:
        inputs.append(truth_path)
    target = output_file(output, option="output", inputs=inputs)
    sentences = _read(source)[:limit]
    truth = None
    if truth_path is not None:
        truth = _read(truth_path)
        if len(truth) < len(sentences):
            raise ValueError(f"gold={gold}: {len(truth)} sentences, but input={input} has "
                             f"{len(sentences)} to draw")
        for predicted, expected in zip(sentences, truth):
            if predicted.forms != expected.forms:
                raise ValueError(f"gold={gold}:{expected.line}: other words than "
                                 f"{predicted.path}:{predicted.line} (the files must hold the "
                                 "same sentences in the same order)")
    page = page_html(sentences, gold=truth, title=title or source.name, where=str(source))
    with atomic_write(target) as handle:  # a page half written never replaces the old one
        handle.write(page)
    return len(sentences)


def _read(path) -> list[Sentence]:
    return read_conllu(path, require_trees=False, single_root=False, check_heads=False).sentences


if __name__ == "__main__":
    sys.exit(main())
