"""Reading and writing CoNLL-U.

A :class:`Sentence` keeps the raw lines of its block (comments, multiword tokens, empty nodes) so
that writing replaces only HEAD/DEPREL (and optionally UPOS) of the syntactic words and leaves
every other byte as it was. Its ``tokenlist`` is the ``conllu`` library's parse of those lines,
built on first access: the columns a parser needs are read from the validated raw lines, which
keeps reading EWT train at about a second (the library's full parse of FEATS/MISC/DEPS would
triple that, and most runs never look at them).

File-level problems (BOM, CRLF, whitespace-only lines, missing final blank line, an empty file)
always raise :class:`~parser.data.validate.ConlluError`; ``on_invalid="skip"`` skips only bad
sentences, counting them with their reasons.
"""

from __future__ import annotations

import logging
import numbers
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import IO, Literal

import conllu

from parser.data.misc import merged_misc
from parser.data.text_files import decode_utf8
from parser.data.validate import ConlluError, check_text, parse_rows
from parser.runtime.io_atomic import atomic_write

__all__ = [
    "COLUMNS",
    "Sentence",
    "Treebank",
    "blocks",
    "format_sentence",
    "parse_sentences",
    "read_conllu",
    "read_tokenized",
    "tokenized_sentence",
    "write_conllu",
]

log = logging.getLogger(__name__)

# The ten CoNLL-U columns, by name, in file order: a token-level layer names the one it reads and
# writes (:mod:`parser.data.layers`), and writers replace columns by name.
COLUMNS: tuple[str, ...] = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL",
                            "DEPS", "MISC")
_INDEX = {name: i for i, name in enumerate(COLUMNS)}


@dataclass(frozen=True)
class Sentence:
    """One sentence: its raw lines and the columns of its syntactic words.

    lines:      the raw lines of the block (no newline characters), comments included.
    forms, lemmas: one string per word (``lemmas`` as written, ``_`` included).
    upos, deprels: one per word; None where the column is ``_``.
    heads:      one per word: 0 for ROOT, -1 where unannotated (``_``).
    path, line: the file and the 1-based line where the sentence starts.
    word_lines: the 1-based file line of each word; ``word_rows`` its index in ``lines``.
    untagged:   column name -> the 1-based ids of the words whose value in that column (LEMMA,
                UPOS, XPOS, FEATS) is not annotation (an annotation file's pre-filled words:
                :mod:`parser.data.partial_trees`): read where a model reads the column as input,
                never a training target. Empty: every value as written is annotation.
    """

    lines: list[str]
    forms: list[str]
    lemmas: list[str]
    upos: list[str | None]
    heads: list[int]
    deprels: list[str | None]
    path: str
    line: int
    word_lines: list[int]
    word_rows: list[int]
    untagged: Mapping[str, frozenset[int]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.forms)

    @property
    def is_annotated(self) -> bool:
        """True when every word has a head."""
        return -1 not in self.heads

    def annotated(self, name: str, values: Sequence[str | None]) -> list[str | None]:
        """``values`` (one per word, of column ``name``) with None for the words whose ``name``
        is not annotation (``untagged``): what training may learn from."""
        skip = self.untagged.get(name, ())
        return [None if word in skip else value for word, value in enumerate(values, start=1)]

    def column(self, name: str) -> list[str | None]:
        """The values of CoNLL-U column ``name`` (``"XPOS"``, ``"FEATS"``, ...) of the words, as
        written; None where ``_`` or where the sentence has no line for the word (text built from
        forms alone). Read from the raw lines, so any column is available without a field.

        >>> s = tokenized_sentence(["Hi", "!"], path="x", stem="x", line=1)
        >>> s.column("FORM"), s.column("FEATS")
        (['Hi', '!'], [None, None])
        """
        index = _column_index(name)
        values: list[str | None] = []
        for row in self.word_rows:
            cols = self.lines[row].split("\t") if row < len(self.lines) else ()
            value = cols[index] if index < len(cols) else "_"
            values.append(None if value == "_" else value)
        if len(values) < len(self.forms):
            values += [None] * (len(self.forms) - len(values))
        return values

    @cached_property
    def tokenlist(self) -> conllu.TokenList:
        """The ``conllu`` parse of all lines: metadata, words, multiword tokens, empty nodes."""
        return conllu.parse_token_and_metadata("\n".join(self.lines))

    @property
    def sent_id(self) -> str | None:
        return self._comment("sent_id")

    @property
    def text(self) -> str | None:
        return self._comment("text")

    def _comment(self, key: str) -> str | None:
        for raw in self.lines:
            if not raw.startswith("#"):
                return None
            name, sep, value = raw[1:].partition("=")
            if sep and name.strip() == key:
                return value.strip()
        return None


@dataclass(frozen=True)
class Treebank:
    """The sentences read from one file, and the sentences skipped with their reasons."""

    path: str
    sentences: list[Sentence]
    skipped: list[ConlluError] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.sentences)

    def __iter__(self) -> Iterator[Sentence]:
        return iter(self.sentences)

    def __getitem__(self, i: int) -> Sentence:
        return self.sentences[i]

    @property
    def n_words(self) -> int:
        return sum(len(s) for s in self.sentences)

    @property
    def n_skipped(self) -> int:
        return len(self.skipped)


def read_conllu(path: str | os.PathLike, *, on_invalid: Literal["raise", "skip"] = "raise",
                require_trees: bool = True, single_root: bool = True,
                check_heads: bool = True, partial_option: str | None = None) -> Treebank:
    """Read and validate a CoNLL-U file.

    on_invalid:    ``"raise"`` the first malformed sentence's :class:`ConlluError`, or
                   ``"skip"`` malformed sentences (counted in ``Treebank.skipped`` and logged).
    require_trees: every HEAD annotated; False allows ``_`` heads (unlabeled text).
    single_root:   exactly one word attached to ROOT (UD); False allows several.
    check_heads:   False accepts integer heads that form no tree (out of range, cycles, ...).
    partial_option: the caller's setting that accepts ``_`` heads (``data.partial_trees=true``),
                   named when ``require_trees`` refuses one.
    """
    if on_invalid not in ("raise", "skip"):
        raise ValueError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    name = str(path)
    text = _read_text(path)
    check_text(text, name)
    skipped: list[ConlluError] = []
    sentences = list(parse_sentences(_blocks(text), name, on_invalid=on_invalid,
                                     require_trees=require_trees, single_root=single_root,
                                     skipped=skipped, check_heads=check_heads,
                                     partial_option=partial_option))
    if skipped:
        log.warning("%s: skipped %d malformed sentence(s) of %d; first: %s", name, len(skipped),
                    len(skipped) + len(sentences), skipped[0])
    if not sentences:
        raise ConlluError(name, 1, f"no valid sentences ({len(skipped)} skipped)")
    return Treebank(name, sentences, skipped)


def parse_sentences(numbered_blocks: Iterable[tuple[int, list[str]]], name: str, *,
                    on_invalid: Literal["raise", "skip"], require_trees: bool, single_root: bool,
                    skipped: list[ConlluError], check_heads: bool = True,
                    partial_option: str | None = None) -> Iterator[Sentence]:
    """The sentences of ``(first line, lines)`` blocks of file ``name``, validated; with
    ``on_invalid="skip"`` a malformed one is appended to ``skipped`` instead of raised (shared by
    the whole-file and the streaming reader); ``check_heads``, ``partial_option``: see
    :func:`parser.data.validate.parse_rows`."""
    for first_line, lines in numbered_blocks:
        try:
            rows = parse_rows(lines, path=name, first_line=first_line,
                              require_trees=require_trees, single_root=single_root,
                              check_heads=check_heads, partial_option=partial_option)
        except ConlluError as error:
            if on_invalid == "raise":
                raise
            skipped.append(error)
            continue
        yield Sentence(lines, rows.forms, rows.lemmas, rows.upos, rows.heads, rows.deprels,
                       name, first_line, rows.word_lines, rows.word_rows)


def read_tokenized(path: str | os.PathLike) -> Treebank:
    """Read plain text, one whitespace-tokenised sentence per line (blank lines ignored).

    Each sentence gets CoNLL-U lines (``# sent_id``, ``# text``, words with ``_`` elsewhere)
    so predictions on it can be written with :func:`write_conllu`; heads are all -1.
    """
    name = str(path)
    text = _read_text(path)
    check_text(text, name, final_blank_line=False)
    stem = Path(name).stem
    sentences = []
    for lineno, raw in enumerate(text.split("\n"), start=1):
        forms = raw.split()
        if forms:
            sentences.append(tokenized_sentence(forms, path=name, stem=stem, line=lineno))
    if not sentences:
        raise ConlluError(name, 1, "no sentences: the file has no tokens")
    return Treebank(name, sentences)


def tokenized_sentence(forms: list[str], *, path: str, stem: str, line: int) -> Sentence:
    """The sentence of one line of plain text: ``# sent_id = <stem>-<line>``, ``# text``, and a
    word line per form with ``_`` in every other column."""
    lines = [f"# sent_id = {stem}-{line}", f"# text = {' '.join(forms)}"]
    lines += [f"{i}\t{form}\t_\t_\t_\t_\t_\t_\t_\t_" for i, form in enumerate(forms, 1)]
    n = len(forms)
    return Sentence(lines, forms, ["_"] * n, [None] * n, [-1] * n, [None] * n, path, line,
                    [line] * n, list(range(2, n + 2)))


def _read_text(path: str | os.PathLike) -> str:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    # newline translation off: CRLF must reach check_text, not be silently normalised
    return decode_utf8(data, path)


def _blocks(text: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based first line, lines) of each blank-line-separated block of ``text``."""
    return blocks(enumerate(text.split("\n"), start=1))


def blocks(numbered_lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, list[str]]]:
    """(first line number, lines) of each blank-line-separated block of ``(number, text)`` lines
    (a file read whole or streamed)."""
    block: list[str] = []
    start = 1
    for lineno, raw in numbered_lines:
        if raw:
            if not block:
                start = lineno
            block.append(raw)
        elif block:
            yield start, block
            block = []
    if block:
        yield start, block


def format_sentence(sentence: Sentence, *, heads: Sequence[int] | None = None,
                    deprels: Sequence[str | None] | None = None,
                    upos: Sequence[str | None] | None = None, clear_deps: bool = False,
                    misc: Sequence[Mapping[str, str]] | None = None,
                    comments: Mapping[str, str] | None = None,
                    columns: Mapping[str, Sequence[str | None]] | None = None,
                    where: str = "sentence") -> str:
    """The sentence's CoNLL-U block (ending with its blank line), with the given columns of its
    words replaced (one value per word; None writes ``_``) and every other byte kept.
    ``clear_deps``: the enhanced graph, built on the old HEAD, is removed so that it cannot
    contradict new heads: DEPS becomes ``_`` and empty nodes (``5.1``), which only it uses, are
    dropped. ``misc``: per word, ``Key=value`` entries added to MISC by the one MISC writer
    (:func:`parser.data.misc.merged_misc`: an entry with the same key is replaced, ``_`` gives
    way, the others are kept); ``comments``: ``# key = value`` lines
    added after the sentence's comments (a comment with the same key is replaced); ``columns``:
    any other column by name (``{"LEMMA": [...], "FEATS": [...]}``), one value per word."""
    n = len(sentence)
    new = {}
    named = [(_column_index(name), values) for name, values in (columns or {}).items()]
    for column, values in ((6, heads), (7, deprels), (3, upos), *named):
        if values is None:
            continue
        values = values.tolist() if hasattr(values, "tolist") else list(values)
        if len(values) != n:
            raise ValueError(f"{where} ({sentence.path}:{sentence.line}): {len(values)} values "
                             f"for column {column + 1} but the sentence has {n} words")
        new[column] = values
    if misc is not None and len(misc) != n:
        raise ValueError(f"{where} ({sentence.path}:{sentence.line}): {len(misc)} MISC entries "
                         f"but the sentence has {n} words")
    if 6 in new:
        for dep, head in enumerate(new[6], start=1):
            if not isinstance(head, numbers.Integral) or not 0 <= head <= n or head == dep:
                raise ValueError(f"{where} ({sentence.path}:{sentence.line}): head {head!r} of "
                                 f"word {dep} is not in 0..{n} or is a self-loop")
        new[6] = [str(int(h)) for h in new[6]]
    lines = list(sentence.lines)
    for i, row in enumerate(sentence.word_rows):
        cols = lines[row].split("\t")
        for column, values in new.items():
            cols[column] = "_" if values[i] is None else str(values[i])
        if misc is not None and misc[i]:
            cols[9] = merged_misc(cols[9], misc[i])
        lines[row] = "\t".join(cols)
    if clear_deps:  # words' DEPS to '_'; empty nodes exist only in the enhanced graph: dropped
        kept = []
        for raw in lines:
            cols = raw.split("\t")
            if raw.startswith("#") or len(cols) <= 8 or "-" in cols[0]:
                kept.append(raw)
            elif "." not in cols[0]:
                cols[8] = "_"
                kept.append("\t".join(cols))
        lines = kept
    if comments:
        lines = _with_comments(lines, comments)
    return "\n".join(lines) + "\n\n"


def _column_index(name: str) -> int:
    try:
        return _INDEX[name]
    except KeyError:
        raise ValueError(f"{name!r} is not a CoNLL-U column; expected one of "
                         f"{', '.join(COLUMNS)}") from None


def _with_comments(lines: list[str], comments: Mapping[str, str]) -> list[str]:
    """``lines`` with ``# key = value`` after the leading comments, same-key comments dropped."""
    start = 0
    while start < len(lines) and lines[start].startswith("#"):
        start += 1
    old = [raw for raw in lines[:start]
           if raw[1:].split("=", 1)[0].strip() not in comments]
    return old + [f"# {key} = {text}" for key, text in comments.items()] + lines[start:]


def write_conllu(sentences: Iterable[Sentence], path_or_stream: str | os.PathLike | IO[str], *,
                 heads: Sequence[Sequence[int]] | None = None,
                 deprels: Sequence[Sequence[str | None]] | None = None,
                 upos: Sequence[Sequence[str | None]] | None = None,
                 clear_deps: bool = False,
                 misc: Sequence[Sequence[Mapping[str, str]]] | None = None,
                 comments: Sequence[Mapping[str, str]] | None = None,
                 columns: Sequence[Mapping[str, Sequence[str | None]]] | None = None) -> None:
    """Write ``sentences`` as CoNLL-U, replacing HEAD / DEPREL / UPOS of the words where given
    (one sequence per sentence), DEPS by ``_`` when ``clear_deps``, adding ``misc`` entries and
    ``comments``, replacing the named ``columns`` (one mapping per sentence; see
    :func:`format_sentence`), and keeping everything else
    byte for byte.

    A path is written atomically (temporary file in the same folder, then rename), so a crash
    never leaves half a file; a stream is written to directly.
    """
    sentences = list(sentences)
    for name, values in (("heads", heads), ("deprels", deprels), ("upos", upos), ("misc", misc),
                         ("comments", comments), ("columns", columns)):
        if values is not None and len(values) != len(sentences):
            raise ValueError(f"write_conllu: {len(values)} {name} for {len(sentences)} sentences")

    def blocks() -> Iterator[str]:
        for i, sentence in enumerate(sentences):
            yield format_sentence(sentence, heads=None if heads is None else heads[i],
                                  deprels=None if deprels is None else deprels[i],
                                  upos=None if upos is None else upos[i],
                                  clear_deps=clear_deps,
                                  misc=None if misc is None else misc[i],
                                  comments=None if comments is None else comments[i],
                                  columns=None if columns is None else columns[i],
                                  where=f"sentence {i}")

    if hasattr(path_or_stream, "write"):
        for block in blocks():
            path_or_stream.write(block)
        return
    with atomic_write(path_or_stream) as out:
        for block in blocks():
            out.write(block)
