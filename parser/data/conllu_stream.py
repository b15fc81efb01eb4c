"""CoNLL-U and plain text read sentence by sentence, for files of any length (``parser-predict``).

The same checks and messages as :func:`parser.data.conllu_io.read_conllu` and
:func:`~parser.data.conllu_io.read_tokenized` (which read a whole file at once, the faster way
for training data), applied line by line: memory holds one sentence (one chunk with
:func:`chunked`), not the file. A file-level problem is raised when its line is reached, so a
caller that must not act on half a file reads it once through first (see
:func:`parser.inference.predict_file`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal, TypeVar

from parser.data.conllu_io import Sentence, blocks, parse_sentences, tokenized_sentence
from parser.data.text_files import decode_utf8
from parser.data.validate import ConlluError

__all__ = ["chunked", "stream_conllu", "stream_tokenized"]

log = logging.getLogger(__name__)

_WHITESPACE = re.compile(r"^[ \t\f\v]+$")
T = TypeVar("T")


def stream_conllu(path: str | os.PathLike, *, on_invalid: Literal["raise", "skip"] = "raise",
                  require_trees: bool = True, single_root: bool = True,
                  report: bool = True, check_heads: bool = True,
                  skipped: list[ConlluError] | None = None) -> Iterator[Sentence]:
    """The sentences of a CoNLL-U file, in order. ``on_invalid="skip"`` skips malformed ones
    (counted and, when ``report``, logged at the end, as ``read_conllu`` does; ``skipped``: a
    list their errors are appended to as they are met, for a caller that bounds them).
    ``check_heads=False`` accepts heads that form no tree (:func:`parser.data.validate.parse_rows`)."""
    if on_invalid not in ("raise", "skip"):
        raise ValueError(f"on_invalid must be 'raise' or 'skip', got {on_invalid!r}")
    name = str(path)
    skipped = [] if skipped is None else skipped
    count = 0
    for sentence in parse_sentences(blocks(_lines(name, final_blank_line=True)), name,
                                    on_invalid=on_invalid, require_trees=require_trees,
                                    single_root=single_root, skipped=skipped,
                                    check_heads=check_heads):
        count += 1
        yield sentence
    if skipped and report:
        log.warning("%s: skipped %d malformed sentence(s) of %d; first: %s", name, len(skipped),
                    len(skipped) + count, skipped[0])
    if not count:
        raise ConlluError(name, 1, f"no valid sentences ({len(skipped)} skipped)")


def stream_tokenized(path: str | os.PathLike) -> Iterator[Sentence]:
    """The sentences of a plain-text file, one whitespace-tokenised sentence per line."""
    name = str(path)
    stem = Path(name).stem
    count = 0
    for lineno, raw in _lines(name, final_blank_line=False):
        forms = raw.split()
        if forms:
            count += 1
            yield tokenized_sentence(forms, path=name, stem=stem, line=lineno)
    if not count:
        raise ConlluError(name, 1, "no sentences: the file has no tokens")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last one shorter).

    >>> list(chunked(range(5), 2))
    [[0, 1], [2, 3], [4]]
    """
    if size < 1:
        raise ValueError(f"chunk size must be >= 1, got {size}")
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _lines(path: str, *, final_blank_line: bool) -> Iterator[tuple[int, str]]:
    """(1-based number, text without its newline) of each line, with the file-level checks of
    :func:`parser.data.validate.check_text` (the last ones when the end is reached)."""
    last_text = 0  # number of the last line holding text
    ends_blank = False  # the file ends with an empty line (after a newline)
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    with handle:
        lineno = 0
        for lineno, data in enumerate(handle, start=1):
            raw = decode_utf8(data, path, first_line=lineno)
            if lineno == 1 and raw.startswith("\ufeff"):
                raise ConlluError(path, 1, "byte-order mark (BOM) at the start of the file; "
                                           "save it as UTF-8 without BOM")
            text = raw.removesuffix("\n")
            if "\r" in text:
                kind = "CRLF line ending" if text.endswith("\r") and raw.endswith("\n") \
                    else "carriage return"
                raise ConlluError(path, lineno, f"{kind} (\\r); convert the file to LF line "
                                                "endings (e.g. dos2unix)")
            if _WHITESPACE.match(text):
                raise ConlluError(path, lineno,
                                  "line holds only whitespace (a separator line must be empty)")
            if text:
                last_text = lineno
            ends_blank = raw == "\n" and last_text > 0
            yield lineno, text
    if not last_text:
        raise ConlluError(path, 1, "no sentences: the file is empty")
    if final_blank_line and not ends_blank:
        raise ConlluError(path, last_text, f"missing blank line after the last sentence (line "
                                           f"{last_text}); a CoNLL-U file ends with an empty line")
