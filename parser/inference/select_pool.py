"""``parser-select`` behind the command line: two streamed passes over a pool through the one
:class:`~parser.inference.annotator.Annotator` (``confidence=True``).

1. Rank: each chunk of the pool is annotated, each sentence's
   :class:`~parser.inference.confidence.SentenceConfidence` scored and fed to a bounded
   :class:`~parser.inference.selection.Chooser` (memory: one chunk and the candidates, whatever
   the pool's size). The random strategies parse nothing here.
2. Write: the pool is read again and only the selected sentences are annotated and written, in
   pool order, as the annotation file: the parser's tree pre-filled, the selected words' HEAD and
   DEPREL ``_`` (the parser's guess kept in MISC ``PredHead`` / ``PredDeprel``), ``HeadProb``
   (and ``DeprelProb``) on every word, and the comments of :mod:`parser.data.partial_trees`
   (``pool_position``, ``selected_words`` for word strategies, ``select_order``,
   ``select_score``). Beside it, the ranked list (TSV: ``rank``, ``sent_id``, ``word`` (``*``:
   the whole sentence), ``score``, ``pool_position``) and, when asked, the remainder: the pool's
   sentences not selected whole, as CoNLL-U (unlabeled text for self-training).

With ``keep_heads="given"`` (an annotation file filled in, back in the pool) the heads the pool
gives are kept: each sentence's marginals are those of the tree CRF restricted to trees with
them (conditioned on what annotators said), its written tree keeps them, and no given word is
selected again (word strategies only: a whole sentence would ask for them again).

A pool sentence that cannot be read (malformed CoNLL-U) is skipped and counted (:class:`Pool`),
the first named by file and line, up to ``max_invalid``; one that cannot be parsed (over
``max_words``) is never selected.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from parser.data.conllu_io import Sentence, format_sentence
from parser.data.conllu_stream import stream_conllu, stream_tokenized
from parser.data.partial_trees import (
    DEPREL,
    HEAD,
    POOL_POSITION,
    PREDICTED_DEPREL,
    PREDICTED_HEAD,
    SELECT_ORDER,
    SELECTED_WORDS,
    edit_words,
)
from parser.data.validate import ConlluError, parse_rows
from parser.inference.annotator import Annotator
from parser.inference.parse import reads_upos
from parser.inference.selection import Chooser, SelectOptions, Unit, asked_words
from parser.runtime.io_atomic import atomic_write

__all__ = ["Pool", "SelectionReport", "annotation_block", "rank_pool", "select_pool",
           "write_selection"]

log = logging.getLogger("parser.select")

SELECT_SCORE = "select_score"
RANKED_HEADER = "rank\tsent_id\tword\tscore\tpool_position\n"


@dataclass
class Pool:
    """A pool file read anew on each pass: CoNLL-U (``conllu``: its heads, if any, need not form
    trees and are read as annotation only by an annotator with ``keep_heads="given"``) or one tokenised sentence per line (``text``). A malformed
    CoNLL-U sentence is skipped and kept in ``skipped`` (of the latest pass); more than
    ``max_invalid`` of them is a ValueError naming the first."""

    path: Path
    format: str = "conllu"
    max_invalid: int = 1000
    skipped: list[ConlluError] = field(default_factory=list)

    def __call__(self) -> Iterator[Sentence]:
        if self.format == "text":
            yield from stream_tokenized(self.path)
            return
        if self.format != "conllu":
            raise ValueError(f"format={self.format}: a pool file is conllu or text")
        self.skipped = []
        for sentence in stream_conllu(self.path, on_invalid="skip", require_trees=False,
                                      check_heads=False, report=False, skipped=self.skipped):
            self._check()
            yield sentence
        self._check()

    def _check(self) -> None:
        if len(self.skipped) > self.max_invalid:
            raise ValueError(f"pool={self.path}: more than max_invalid={self.max_invalid} "
                             f"sentences cannot be read; first: {self.skipped[0]}")


@dataclass(frozen=True)
class SelectionReport:
    """What a selection read and chose: ``sentences`` and ``words`` of the pool read,
    ``unreadable`` sentences skipped (``first_unreadable``: file:line: problem), ``failed`` (not
    parsed), the ``units`` chosen (best first) and the sentences and words written."""

    sentences: int
    words: int
    unreadable: int
    first_unreadable: str | None
    failed: int
    units: list[Unit]
    written_sentences: int = 0
    written_words: int = 0

    def summary(self, options: SelectOptions, output: str | os.PathLike) -> str:
        unit = "word" if options.per_word else "sentence"
        text = (f"selected {len(self.units)} {unit}s ({self.written_words} words to annotate in "
                f"{self.written_sentences} sentences; strategy={options.strategy}, "
                f"budget={options.budget} {options.unit}"
                + (f", cap={options.cap}" if options.cap else "")
                + (f", stratify={options.stratify}" if options.stratify != "none" else "")
                + f") from {self.sentences} pool sentences -> {output}")
        if self.unreadable:
            text += (f"; {self.unreadable} unreadable pool sentences skipped (first: "
                     f"{self.first_unreadable})")
        if self.failed:
            text += f"; {self.failed} not parsed (never selected)"
        return text


def rank_pool(annotator: Annotator, sentences: Iterable[Sentence], options: SelectOptions, *,
              chunk_size: int = 1000) -> tuple[list[Unit], int, int, int]:
    """Pass 1: ``(units chosen, sentences read, words read, sentences not parsed)``."""
    chooser = Chooser(options)
    # of the chunk being annotated, appended as the stream is read: (length, given words)
    lengths: list[tuple[int, frozenset[int]]] = []
    count = failed = 0
    kept = annotator.keep_heads == "given"
    if kept and not options.per_word:
        raise ValueError(f"keep_heads=given: strategy={options.strategy} selects whole "
                         "sentences, which would ask again for their given heads; use "
                         "strategy=words or random_words")
    if options.random:  # keys only: no parse (a sentence over max_words would fail: left out)
        words = 0
        for count, sentence in enumerate(sentences, start=1):
            words += len(sentence)
            if len(sentence) > annotator.max_words:
                failed += 1
            else:
                chooser.add(count - 1, len(sentence), None, _given(sentence) if kept else ())
        return chooser.chosen(), count, words, failed
    if not annotator.confidence:
        raise ValueError("rank_pool: the annotator must compute confidence (confidence=True)")
    words = 0
    ranker = annotator.scoring_only()  # no blocks or columns: pass 2 writes the chosen ones
    for part in ranker.stream(_counted(_checked_upos(sentences, annotator), lengths, kept),
                              chunk_size=chunk_size):
        for (length, given), sure in zip(lengths, part.confidence or [None] * part.sentences):
            failed += sure is None
            chooser.add(count, length, sure, given)
            count, words = count + 1, words + length
        del lengths[: part.sentences]
    return chooser.chosen(), count, words, failed


def write_selection(annotator: Annotator, sentences: Iterable[Sentence], units: Sequence[Unit],
                    output: str | os.PathLike, *, ranked: str | os.PathLike,
                    remainder: str | os.PathLike | None = None, chunk_size: int = 1000,
                    ) -> tuple[int, int]:
    """Pass 2: the annotation file, the ranked list and the remainder (module docstring);
    returns ``(sentences, words asked for)`` written (a selected sentence whose parse fails now
    is left out with a warning)."""
    by_sentence: dict[int, list[Unit]] = {}
    for unit in units:
        by_sentence.setdefault(unit.position, []).append(unit)
    rows: list[tuple[int, str]] = []
    written = asked = 0
    with ExitStack() as stack:
        out = stack.enter_context(atomic_write(output))
        rest = None if remainder is None else stack.enter_context(atomic_write(remainder))
        chunk: list[tuple[int, Sentence]] = []

        def flush() -> None:
            nonlocal written, asked
            if not chunk:
                return
            part = annotator.annotate([sentence for _, sentence in chunk], position=chunk[0][0])
            for (position, sentence), block, sure in zip(chunk, part.blocks, part.confidence
                                                         or [None] * len(chunk)):
                mine = by_sentence[position]
                if sure is None:
                    log.warning("%s: sentence %s (pool position %d) selected but not parsed now: "
                                "left out", annotator.name, sentence.sent_id, position + 1)
                    continue
                out.write(annotation_block(block, mine, position=position, path=sentence.path))
                written, asked = written + 1, asked + asked_words(mine)
                rows.extend((unit.rank, _ranked_row(unit, sentence)) for unit in mine)
            chunk.clear()

        for position, sentence in enumerate(_checked_upos(sentences, annotator)):
            mine = by_sentence.get(position)
            if mine is not None:
                chunk.append((position, sentence))
                if len(chunk) >= chunk_size:
                    flush()
            if rest is not None and (mine is None or mine[0].word is not None):
                rest.write("\n".join(sentence.lines) + "\n\n")
        flush()
        with atomic_write(ranked) as table:
            table.write(RANKED_HEADER)
            table.writelines(row for _, row in sorted(rows))
    return written, asked


def select_pool(annotator: Annotator, pool: Callable[[], Iterable[Sentence]],
                options: SelectOptions, output: str | os.PathLike, *,
                ranked: str | os.PathLike, remainder: str | os.PathLike | None = None,
                chunk_size: int = 1000) -> SelectionReport:
    """Both passes over ``pool`` (called once per pass for a fresh stream; a :class:`Pool`
    reports its unreadable sentences)."""
    units, count, words, failed = rank_pool(annotator, pool(), options, chunk_size=chunk_size)
    skipped = list(getattr(pool, "skipped", []))
    if skipped:
        log.warning("%s: skipped %d unreadable sentence(s); first: %s", getattr(pool, "path", ""),
                    len(skipped), skipped[0])
    written, asked = write_selection(annotator, pool(), units, output, ranked=ranked,
                                     remainder=remainder, chunk_size=chunk_size)
    return SelectionReport(count, words, len(skipped), str(skipped[0]) if skipped else None,
                           failed, units, written, asked)


def annotation_block(block: str, units: Sequence[Unit], *, position: int, path: str) -> str:
    """The annotator's CoNLL-U ``block`` of one sentence as the annotation file holds it: the
    selected ``units``' words (every word for a whole sentence) with HEAD and DEPREL ``_`` and
    the parser's guess in MISC, and the selection's comments (module docstring)."""
    lines = block.rstrip("\n").split("\n")
    rows = parse_rows(lines, path=path, first_line=1, require_trees=False, check_heads=False)
    sentence = Sentence(lines, rows.forms, rows.lemmas, rows.upos, rows.heads, rows.deprels, path,
                        1, rows.word_lines, rows.word_rows)
    whole = units[0].word is None
    units = sorted(units, key=lambda unit: unit.word or 0)
    words = list(range(1, len(sentence) + 1)) if whole else [unit.word for unit in units]
    misc: list[dict[str, str]] = [{} for _ in range(len(sentence))]
    for word in words:
        misc[word - 1] = {PREDICTED_HEAD: str(rows.heads[word - 1]),
                          PREDICTED_DEPREL: rows.deprels[word - 1] or "_"}
    comments = {POOL_POSITION: str(position + 1)}
    if not whole:
        comments[SELECTED_WORDS] = ",".join(map(str, words))
    comments[SELECT_ORDER] = ",".join(str(unit.rank) for unit in units)
    comments[SELECT_SCORE] = ",".join(f"{unit.score:.4f}" for unit in units)
    text = format_sentence(sentence, misc=misc, comments=comments)
    blank = {word: {HEAD: "_", DEPREL: "_"} for word in words}
    return "\n".join(edit_words(text.rstrip("\n").split("\n"), blank)) + "\n\n"


def _ranked_row(unit: Unit, sentence: Sentence) -> str:
    word = "*" if unit.word is None else str(unit.word)
    return f"{unit.rank}\t{sentence.sent_id or '_'}\t{word}\t{unit.score:.6f}\t{unit.position + 1}\n"


def _counted(sentences: Iterable[Sentence], lengths: list[tuple[int, frozenset[int]]],
             kept: bool) -> Iterator[Sentence]:
    """``sentences``, each one's length and (``kept``) given words appended to ``lengths`` as it
    is read."""
    for sentence in sentences:
        lengths.append((len(sentence), _given(sentence) if kept else frozenset()))
        yield sentence


def _given(sentence: Sentence) -> frozenset[int]:
    """The words whose HEAD the pool gives (the annotator's kept arcs, ``given_heads``)."""
    return frozenset(word for word, head in enumerate(sentence.heads, start=1) if head >= 0)


def _checked_upos(sentences: Iterable[Sentence], annotator: Annotator) -> Iterator[Sentence]:
    """``sentences``, refused at the first when the parser reads UPOS, no tagger tags them and
    the first sentence has none (text, or a UPOS column of '_')."""
    needs = annotator.tagger is None and reads_upos(annotator.config or {})
    for sentence in sentences:
        if needs and all(tag is None for tag in sentence.upos):
            raise ValueError(f"{sentence.path}:{sentence.line}: no UPOS tags and the parser was "
                             "trained with UPOS input: pass tagger=<tagger best.pt> (or a "
                             "pipeline=) to tag the pool")
        needs = False
        yield sentence
