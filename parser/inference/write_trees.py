"""CoNLL-U blocks of :func:`parser.inference.alternatives.parse_alternatives`' trees.

- k-best (``kbest=K``): K blocks per sentence, best first, each the full sentence (same words,
  comments and other columns) with that tree's HEAD/DEPREL, ``# tree_rank = r`` (1-based) and
  ``# tree_prob = p`` (the tree's probability, 6 significant digits).
- samples (``samples=K``): the same with ``# sample = i`` (1-based, in draw order).
- In both, ``# sent_id`` becomes ``<sent_id>/<r>`` (rank or sample number) so that ids stay
  unique; a sentence without one gets ``<its 1-based position in the input>/<r>``.
- A sentence not parsed (fixed arcs that admit no tree, naming the words; over ``max_words``; a
  parse that failed: :mod:`parser.inference.annotator`) is written once, as read (no column
  changed), with ``# parse_error = ...`` saying why (:func:`error_block`).

``confidence`` adds to every tree what :mod:`parser.inference.confidence` writes for the best one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import replace

from parser.data.conllu_io import Sentence, format_sentence
from parser.inference.alternatives import SentenceTrees, Tree
from parser.inference.columns import misc_of_words, written_columns, written_misc
from parser.inference.confidence import confidence_annotations

__all__ = ["error_block", "tree_blocks", "tree_prob"]

MODES = ("best", "kbest", "samples")
REASON_CHARS = 500  # a parse_error comment (an exception's message can be pages long)


def tree_prob(log_prob: float) -> str:
    """A tree's probability as written in ``# tree_prob``.

    >>> tree_prob(-0.10536051565782628), tree_prob(-50.0), tree_prob(float("-inf"))
    ('0.9', '1.92875e-22', '0')
    """
    return f"{math.exp(log_prob):.6g}"


def tree_blocks(sentence: Sentence, entry: SentenceTrees, *, position: int, mode: str,
                upos: Sequence[str | None] | None = None, keep_deps: bool = False,
                keep_columns: str = "none") -> Iterator[str]:
    """The blocks of one sentence (``position``: its 0-based place in the input); ``mode``:
    ``best`` (one block, as ``parser-predict`` writes), ``kbest`` or ``samples``; ``upos``: the
    UPOS column to write (a tagger's), else the parser's own tags when it has them; the
    annotation columns as :func:`parser.inference.columns.written_columns` says."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}: expected one of {', '.join(MODES)}")
    if entry.error is not None:
        yield error_block(sentence, entry.error)
        return
    if upos is None:
        upos = entry.upos
    predicted = dict(entry.columns)
    if upos is not None:
        predicted["UPOS"] = list(upos)
    columns = written_columns(sentence, predicted, keep_columns=keep_columns)
    layer_misc = written_misc(sentence, predicted, keep_columns=keep_columns)
    for rank, tree in enumerate(entry.trees, start=1):
        comments: dict[str, str] = {}
        shown = sentence
        if mode != "best":
            shown = _renamed(sentence, f"{sentence.sent_id or position + 1}/{rank}")
            comments["tree_rank" if mode == "kbest" else "sample"] = str(rank)
            comments["tree_prob"] = tree_prob(tree.log_prob)
        confidence = None
        if tree.confidence is not None:
            [confidence], [extra] = confidence_annotations([tree.confidence])
            comments.update(extra)
        misc = misc_of_words(layer_misc, confidence)
        yield _block(shown, tree, columns=columns, keep_deps=keep_deps, misc=misc, comments=comments)


def error_block(sentence: Sentence, reason: str) -> str:
    """A sentence not parsed: its block as read with ``# parse_error = <reason>`` (one line, at
    most :data:`REASON_CHARS` characters)."""
    reason = _one_line(reason)
    if len(reason) > REASON_CHARS:
        reason = reason[: REASON_CHARS - 3] + "..."
    return format_sentence(sentence, comments={"parse_error": reason})


def _block(sentence: Sentence, tree: Tree, *, columns, keep_deps: bool, misc, comments) -> str:
    return format_sentence(sentence, heads=tree.heads, deprels=tree.deprels, columns=columns,
                           clear_deps=not keep_deps, misc=misc, comments=comments or None)


def _renamed(sentence: Sentence, sent_id: str) -> Sentence:
    """``sentence`` with ``# sent_id = sent_id`` in place of its own (or first, when it has none)."""
    lines = list(sentence.lines)
    for i, raw in enumerate(lines):
        if not raw.startswith("#"):
            break
        name, sep, _ = raw[1:].partition("=")
        if sep and name.strip() == "sent_id":
            lines[i] = f"# sent_id = {sent_id}"
            return replace(sentence, lines=lines)
    return replace(sentence, lines=[f"# sent_id = {sent_id}", *lines],
                   word_rows=[row + 1 for row in sentence.word_rows])


def _one_line(text: str) -> str:
    return " ".join(text.split())
