"""Training files with partial trees: the annotation files of ``parser-select`` as annotators hand
them back, and any CoNLL-U file whose HEAD or DEPREL is ``_`` on some words (``data.partial_trees``).

An annotation file (:mod:`parser.inference.selection` writes it) holds the sentences chosen from a
pool, each with the comments

- ``# pool_position = 17``: the sentence's 1-based position among the pool's readable sentences;
- ``# selected_words = 4,7``: the words the annotator is asked for (word strategies; absent when
  the whole sentence was selected: every word is asked for);
- ``# select_order = 12,3``: the rank of each selected unit in the selection (one number per word
  of ``selected_words``, or one for a whole sentence);

and the parser's tree on the other words. Read back for training (:func:`read_partial_trees`),
only the asked-for words are annotation: the other words' heads are the parser's guesses, read as
unannotated (``-1``), whatever the file holds there. The LEMMA, UPOS, XPOS and FEATS of an
annotation file's words are the pool's or the parser's values, not annotation: never training
targets (``Sentence.untagged``), except the columns named in ``annotated_columns``
(``data.annotated_columns``), which the annotator filled for the asked-for words. An asked-for word the annotator left with
HEAD ``_`` is unannotated; one with a HEAD and DEPREL ``_`` has a head and no relation (``-1``;
the objectives leave its label out). A sentence without ``# selected_words`` is read as written
(a complete tree, or ``_`` where a word has no head). The heads kept must be part of some tree
(no cycle, one root at most), checked as any training file's, naming the line.

:func:`fill_selected` plays the annotator from gold trees (simulations, tests).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Literal

from parser.data.conllu_io import Sentence, Treebank, read_conllu
from parser.data.conllu_stream import stream_conllu
from parser.data.validate import ConlluError, parse_rows
from parser.runtime.io_atomic import atomic_write

__all__ = [
    "POOL_POSITION", "PREDICTED_DEPREL", "PREDICTED_HEAD", "SELECTED_WORDS", "SELECT_ORDER",
    "TOKEN_COLUMNS",
    "annotated_part", "comment", "edit_words", "fill_selected", "has_heads", "read_partial_trees",
    "refuse_selection_file", "selected_words",
]

log = logging.getLogger(__name__)

POOL_POSITION = "pool_position"
SELECTED_WORDS = "selected_words"
SELECT_ORDER = "select_order"
# MISC keys of an asked-for word: the parser's head and relation, which its HEAD/DEPREL ('_') lack.
PREDICTED_HEAD, PREDICTED_DEPREL = "PredHead", "PredDeprel"
HEAD, DEPREL = 6, 7  # column indices
# The token-level columns an annotation file pre-fills (data.annotated_columns names those that
# an annotator filled for the asked-for words).
TOKEN_COLUMNS = ("LEMMA", "UPOS", "XPOS", "FEATS")


def comment(sentence: Sentence, key: str) -> str | None:
    """The value of the sentence's ``# key = value`` comment, or None."""
    for raw in sentence.lines:
        if not raw.startswith("#"):
            break
        name, sep, value = raw[1:].partition("=")
        if sep and name.strip() == key:
            return value.strip()
    return None


def selected_words(sentence: Sentence) -> list[int] | None:
    """The word ids of ``# selected_words`` (None without the comment); ConlluError naming the
    line when it is not a list of the sentence's word ids.

    >>> from parser.data.conllu_io import tokenized_sentence
    >>> s = tokenized_sentence(["a", "b", "c"], path="x", stem="x", line=1)
    >>> selected_words(s) is None
    True
    """
    value = comment(sentence, SELECTED_WORDS)
    if value is None:
        return None
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not all(item.isascii() and item.isdigit() and len(item) <= 9 for item in items) or \
            not all(1 <= int(item) <= len(sentence) for item in items):
        raise ConlluError(sentence.path, sentence.line, f"# {SELECTED_WORDS} = {value[:40]!r}: "
                          f"expected word ids of this sentence (1..{len(sentence)}), comma-separated")
    return [int(item) for item in items]


def edit_words(lines: list[str], values: Mapping[int, Mapping[int, str]]) -> list[str]:
    """``lines`` (a sentence's raw lines) with, for each word id of ``values``, the given columns
    (index -> text) replaced; every other line and column kept.

    >>> edit_words(["# c", "1\\ta\\t_\\t_\\t_\\t_\\t0\\troot\\t_\\t_"], {1: {6: "_", 7: "_"}})[1]
    '1\\ta\\t_\\t_\\t_\\t_\\t_\\t_\\t_\\t_'
    """
    edited = []
    for raw in lines:
        cols = raw.split("\t")
        if not raw.startswith("#") and cols[0].isdigit() and int(cols[0]) in values:
            for column, text in values[int(cols[0])].items():
                cols[column] = text
            raw = "\t".join(cols)
        edited.append(raw)
    return edited


def annotated_part(sentence: Sentence, *, single_root: bool = True,
                   annotated_columns: Iterable[str] = ()) -> Sentence:
    """``sentence`` with the HEAD and DEPREL of every word outside its ``# selected_words``
    written ``_``, its remaining heads validated, and its token columns marked as no annotation
    (``Sentence.untagged``): every word's, but the asked-for words' ``annotated_columns``.
    Unchanged when it is not an annotation file's (neither comment)."""
    chosen = selected_words(sentence)
    if chosen is None and comment(sentence, POOL_POSITION) is None:
        return sentence
    words = range(1, len(sentence) + 1)
    keep = set(words if chosen is None else chosen)
    lines = edit_words(sentence.lines, {word: {HEAD: "_", DEPREL: "_"}
                                        for word in words if word not in keep})
    rows = parse_rows(lines, path=sentence.path, first_line=sentence.line, require_trees=False,
                      single_root=single_root)
    untagged = {column: frozenset(words) - (keep if column in annotated_columns else set())
                for column in TOKEN_COLUMNS}
    return Sentence(lines, rows.forms, rows.lemmas, rows.upos, rows.heads, rows.deprels,
                    sentence.path, sentence.line, rows.word_lines, rows.word_rows, untagged)


def has_heads(sentence: Sentence) -> bool:
    """Whether at least one word of ``sentence`` has a head."""
    return any(head >= 0 for head in sentence.heads)


def read_partial_trees(path: str | os.PathLike, *, on_invalid: Literal["raise", "skip"] = "raise",
                       single_root: bool = True,
                       annotated_columns: Iterable[str] = ()) -> Treebank:
    """A training file that may hold partial trees (``data.partial_trees``): HEAD ``_`` is
    unannotated, an annotation file's words outside ``# selected_words`` too, and its token
    columns are no annotation but ``annotated_columns`` of the asked-for words (module docstring).
    ``on_invalid="skip"`` skips a malformed sentence (counted, logged) instead of raising."""
    name = str(path)
    annotated_columns = tuple(annotated_columns)
    unknown = sorted(set(annotated_columns) - set(TOKEN_COLUMNS))
    if unknown:
        raise ValueError(f"data.annotated_columns: {', '.join(unknown)} not one of "
                         f"{', '.join(TOKEN_COLUMNS)} (HEAD and DEPREL are always annotation)")
    read = read_conllu(path, on_invalid=on_invalid, require_trees=False, single_root=single_root,
                       check_heads=False)
    sentences, skipped = [], list(read.skipped)
    for sentence in read.sentences:
        try:
            part = annotated_part(sentence, single_root=single_root,
                                  annotated_columns=annotated_columns)
            if part is sentence:  # not an annotation file's: the heads as read, checked as usual
                parse_rows(sentence.lines, path=name, first_line=sentence.line,
                           require_trees=False, single_root=single_root)
        except ConlluError as error:
            if on_invalid == "raise":
                raise
            skipped.append(error)
            continue
        sentences.append(part)
    if len(skipped) > read.n_skipped:
        log.warning("%s: skipped %d sentence(s) whose annotated heads form no tree; first: %s",
                    name, len(skipped) - read.n_skipped, skipped[read.n_skipped])
    if not sentences:
        raise ConlluError(name, 1, f"no valid sentences ({len(skipped)} skipped)")
    words = sum(len(s) for s in sentences)
    annotated = sum(head >= 0 for s in sentences for head in s.heads)
    log.info("%s: partial trees: %d of %d words have a head (%d of %d sentences complete)",
             name, annotated, words, sum(s.is_annotated for s in sentences), len(sentences))
    return Treebank(name, sentences, skipped)


def refuse_selection_file(path: str | os.PathLike, *, option: str) -> None:
    """ValueError naming the line when ``path`` holds a ``# selected_words`` comment: read as
    complete trees, its pre-filled words (the parser's guesses) would count as annotation."""
    with open(path, encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if line.startswith("#") and line[1:].split("=", 1)[0].strip() == SELECTED_WORDS:
                raise ValueError(
                    f"{option}={path}: line {number} is a parser-select annotation file's "
                    f"'# {SELECTED_WORDS}': only those words are annotation, the others are the "
                    "parser's guesses; set data.partial_trees=true to train on it")


def fill_selected(annotation: str | os.PathLike, gold: str | os.PathLike,
                  output: str | os.PathLike) -> int:
    """Play the annotator: ``annotation`` (a ``parser-select`` file) with the HEAD and DEPREL of
    each asked-for word copied from the same sentence of ``gold`` (the pool with its trees,
    matched by ``# pool_position``, read as the selection read it), written to ``output``;
    returns the words filled. Both files are streamed."""
    pool = _positions(stream_conllu(gold, on_invalid="skip", require_trees=False,
                                    check_heads=False))
    filled = 0
    with atomic_write(Path(output)) as out:
        for sentence in stream_conllu(annotation, require_trees=False, check_heads=False):
            position = comment(sentence, POOL_POSITION)
            if position is None or not position.isdigit():
                raise ConlluError(str(annotation), sentence.line,
                                  f"no '# {POOL_POSITION} = <n>' comment: not a parser-select file")
            source = _advance(pool, int(position), where=f"{annotation}:{sentence.line}")
            if source.forms != sentence.forms:
                raise ValueError(f"{annotation}:{sentence.line}: the words differ from those of "
                                 f"{gold}:{source.line} (pool position {position})")
            chosen = selected_words(sentence) or range(1, len(sentence) + 1)
            values = {word: {HEAD: _text(source.heads[word - 1]),
                             DEPREL: source.deprels[word - 1] or "_"} for word in chosen}
            filled += sum(source.heads[word - 1] >= 0 for word in chosen)
            out.write("\n".join(edit_words(sentence.lines, values)) + "\n\n")
    return filled


def _positions(sentences: Iterable[Sentence]) -> Iterator[tuple[int, Sentence]]:
    return ((position, sentence) for position, sentence in enumerate(sentences, start=1))


def _advance(pool: Iterator[tuple[int, Sentence]], target: int, *, where: str) -> Sentence:
    for position, sentence in pool:
        if position == target:
            return sentence
        if position > target:
            break
    raise ValueError(f"{where}: pool position {target} not found in the gold file (positions "
                     "must increase, as parser-select writes them)")


def _text(head: int) -> str:
    return "_" if head < 0 else str(head)
