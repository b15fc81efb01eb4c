"""An unlabeled corpus read from disk record by record, never held whole (``data.unlabeled_corpus``).

Formats (:func:`~parser.data.corpus_files.detect_format`): ``tokenised``, one sentence per line,
words split on whitespace; ``conllu``, blank-line separated blocks (FORM and UPOS read, trees
ignored); ``raw``, one paragraph per line, split into sentences of words by ``segment`` (built
in :mod:`parser.train.corpus_data` from a tokenizer checkpoint or pipeline file: this package
sits below the tokenizer). A record is a line (a block for CoNLL-U); a raw record may give several
sentences.

Ranks: records are numbered over the whole corpus (files in sorted order, after the ``head``
sentences held in memory: the training file's own unlabeled part); rank ``r`` of ``num_replicas``
takes records ``r, r + num_replicas, ...``. The ranks together take every record once per epoch,
and the split is the same in every run. Every rank reads every byte (a record is skipped unparsed
when it is another rank's), which keeps the split exact whatever the number of shards.

Bad input: an undecodable line, a malformed CoNLL-U block, a sentence of more than ``max_words``
words (or a line of more than ``max_words * 64`` bytes: never held whole) and a raw line the
segmenter refuses are skipped and counted in :attr:`UnlabeledCorpus.counts` (``bad``), the first
ones kept with file and line. Empty lines are counted (``empty``) but are not bad: blank lines
between documents are normal in text corpora. When the bad records exceed ``max_bad_share`` of
those read (taken over at least :data:`SHARE_FLOOR` records, so that one bad line at the start
does not stop a run) reading stops with a ValueError naming the first bad lines.

Vocabulary: there is no counting pass over the corpus. The words come from the labeled data (and
the in-memory text); unseen corpus words are UNK for the word embedding but keep their characters.
A counting pass would read the whole corpus before the first step (minutes for ten million
sentences, against the time-to-first-step target) and add words that only the unsupervised terms
ever train.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from parser.data.corpus_files import Line, LineReader
from parser.data.text_files import decode_utf8
from parser.data.validate import ConlluError, parse_rows

__all__ = ["SHARE_FLOOR", "CorpusSentence", "UnlabeledCorpus"]

log = logging.getLogger(__name__)

SHARE_FLOOR = 1000  # records: the bad share is taken over at least this many
BYTES_PER_WORD = 64  # a line longer than max_words * this is over-long without being split
FIRST_BAD = 5  # bad lines named in the log and in the error

# (index, forms, upos): upos None for text without tags; index unique over the ranks of an epoch.
CorpusSentence = tuple[int, list[str], list[str | None] | None]
Segment = Callable[[str], Iterable[list[str]]]


class UnlabeledCorpus:
    """This rank's records of ``files`` (after ``head``), one record at a time (:meth:`read`)."""

    def __init__(self, files: Sequence[Path], *, fmt: str, segment: Segment | None = None,
                 head: Sequence[tuple[list[str], list[str | None] | None]] = (),
                 max_words: int, max_bad_share: float, num_replicas: int = 1, rank: int = 0,
                 option: str = "data.unlabeled_corpus") -> None:
        if fmt == "raw" and segment is None:
            raise ValueError(f"{option}: raw text needs a segmenter (data.unlabeled_tokenizer)")
        if max_words < 1:
            raise ValueError(f"data.max_sentence_words={max_words}: must be >= 1")
        if not 0.0 <= max_bad_share <= 1.0:
            raise ValueError(f"data.max_bad_share={max_bad_share}: expected a value in [0, 1]")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} not in 0..{num_replicas - 1}")
        self.files, self.fmt, self.segment = list(files), fmt, segment
        self.head = list(head)
        self.max_words, self.max_bad_share, self.option = max_words, max_bad_share, option
        self.num_replicas, self.rank = num_replicas, rank
        self.counts = {"records": 0, "sentences": 0, "bad": 0, "empty": 0}  # this rank's, all epochs
        self.first_bad: list[str] = []
        self._reader: LineReader | None = None
        self.restart()

    # -- position -------------------------------------------------------------------------------

    def restart(self) -> None:
        """Back to the first record (a new epoch)."""
        self._close()
        self._record, self._file, self._epoch_sentences = 0, 0, 0
        self._offset = self._line = 0

    def state_dict(self) -> dict:
        offset, line = self._reader.position if self._reader is not None else (self._offset, self._line)
        return {"record": self._record, "file": self._file, "offset": offset, "line": line,
                "epoch_sentences": self._epoch_sentences, "counts": dict(self.counts),
                "first_bad": list(self.first_bad), "files": [str(f) for f in self.files],
                "num_replicas": self.num_replicas}

    def load_state_dict(self, state: dict) -> None:
        if state["files"] != [str(f) for f in self.files] or state["num_replicas"] != self.num_replicas:
            raise ValueError(f"{self.option}: the checkpoint's corpus ({len(state['files'])} files "
                             f"from {state['files'][:1]}, {state['num_replicas']} ranks) is not "
                             f"this run's ({len(self.files)} files, {self.num_replicas} ranks)")
        self._close()
        self._record, self._file = int(state["record"]), int(state["file"])
        self._offset, self._line = int(state["offset"]), int(state["line"])
        self._epoch_sentences = int(state["epoch_sentences"])
        self.counts = dict(state["counts"])
        self.first_bad = list(state["first_bad"])

    # -- reading --------------------------------------------------------------------------------

    def read(self) -> list[CorpusSentence] | None:
        """The sentences of this rank's next record ([] for an empty or bad one); None at the end
        of the corpus (call :meth:`restart` for the next epoch)."""
        while True:
            mine = self._record % self.num_replicas == self.rank
            if self._record < len(self.head):
                self._record += 1
                if mine:
                    forms, upos = self.head[self._record - 1]
                    return self._keep([(list(forms), None if upos is None else list(upos))])
                continue
            record = self._next_record(parse=mine)
            if record is None:
                return None
            self._record += 1
            if mine:
                return self._parse(*record)

    def _next_record(self, *, parse: bool) -> tuple[Line, list[Line]] | None:
        """(first line, lines) of the next record across the files; the lines are only collected
        when ``parse``. None after the last file."""
        while self._file < len(self.files):
            if self._reader is None:
                self._reader = LineReader(self.files[self._file], offset=self._offset, line=self._line,
                                          max_bytes=self.max_words * BYTES_PER_WORD)
            first = self._reader.next_line()
            if self.fmt == "conllu":
                while first is not None and not first.data and not first.cut:  # blank lines
                    first = self._reader.next_line()
            if first is not None:
                return first, self._rest_of_block(first, keep=parse)
            self._close()
            self._file, self._offset, self._line = self._file + 1, 0, 0
        return None

    def _rest_of_block(self, first: Line, *, keep: bool) -> list[Line]:
        if self.fmt != "conllu":
            return [first]
        lines, limit = [first], 2 * self.max_words + 100  # words, multiword ranges, comments
        while (line := self._reader.next_line()) is not None and (line.data or line.cut):
            if keep and len(lines) <= limit:
                lines.append(line)
        return lines

    def _parse(self, first: Line, lines: list[Line]) -> list[CorpusSentence]:
        path = str(self.files[self._file])
        self.counts["records"] += 1
        try:
            if any(line.cut for line in lines) or len(lines) > 2 * self.max_words + 100:
                raise ConlluError(path, first.number, "over-long line or block (data.max_sentence_"
                                                      f"words={self.max_words})")
            texts = [decode_utf8(line.data, path, first_line=line.number) for line in lines]
            if self.fmt == "conllu":
                rows = parse_rows(texts, path=path, first_line=first.number, require_trees=False)
                found = [(rows.forms, rows.upos)]
            elif self.fmt == "tokenised":
                found = [(texts[0].split(), None)]
            else:
                found = [(list(words), None) for words in self.segment(texts[0])] if texts[0].strip() else []
            for forms, _ in found:
                if len(forms) > self.max_words:
                    raise ConlluError(path, first.number, f"{len(forms)} words (data.max_sentence_"
                                                          f"words={self.max_words})")
        except ValueError as error:  # ConlluError, or the segmenter's refusal
            self._bad(error if isinstance(error, ConlluError) else ConlluError(path, first.number, str(error)))
            return []
        return self._keep(found)

    def _keep(self, found: list[tuple[list[str], list[str | None] | None]]) -> list[CorpusSentence]:
        kept = []
        for forms, upos in found:
            if forms:
                kept.append((self._epoch_sentences * self.num_replicas + self.rank, forms, upos))
                self._epoch_sentences += 1
        if kept:
            self.counts["sentences"] += len(kept)
        else:
            self.counts["empty"] += 1
        return kept

    def _bad(self, error: ConlluError) -> None:
        self.counts["bad"] += 1
        if len(self.first_bad) < FIRST_BAD:
            self.first_bad.append(str(error))
            log.warning("%s: skipped a bad record: %s", self.option, error)
        allowed = self.max_bad_share * max(self.counts["records"], SHARE_FLOOR)
        if self.counts["bad"] > allowed:
            raise ValueError(
                f"{self.option}: {self.counts['bad']} bad records of {self.counts['records']} read "
                f"(rank {self.rank}) exceed data.max_bad_share={self.max_bad_share} (taken over at "
                f"least {SHARE_FLOOR} records); the first: {'; '.join(self.first_bad)}"
            )

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

