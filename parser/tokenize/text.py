"""A treebank's own text, as the tokenizer learns and is scored on it.

A CoNLL-U file is read as documents of paragraphs (``# newdoc`` / ``# newpar`` comments; a file
with neither is one paragraph) of sentences of surface tokens (a multiword token's range line is
one token; its words are kept beside it). The text of a paragraph is its tokens joined by a space
unless ``SpaceAfter=No``, sentences joined the same way (the CoNLL 2018 ``conllu_to_text`` rule), so
it equals the sentences' ``# text`` comments joined.

Every character gets one tag:

- ``O``: whitespace between tokens,
- ``B``: the first character of a token,
- ``I``: a later character of a token,
- ``E``: the last character of a sentence's last token (longer than one character),
- ``S``: a one-character token that ends a sentence (``.``, ``!``).

A token is a ``B``/``S`` character and the ``I``/``E`` characters after it; a sentence ends after an
``E`` or ``S``. Whitespace is always ``O`` and never inside a token (a form holding a space, as
French ``1 000``, is learnt as two tokens).

>>> paragraph = [[Token("Hi", False, ("Hi",)), Token("!", True, ("!",))], [Token("Go", True, ("Go",))]]
>>> text, tags = paragraph_tags(paragraph)
>>> text, "".join(TAGS[t] for t in tags)
('Hi! Go', 'BISOBE')
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from parser.data.text_files import open_text

__all__ = [
    "TAGS",
    "B",
    "E",
    "I",
    "O",
    "S",
    "Token",
    "paragraph_tags",
    "paragraph_text",
    "read_paragraphs",
    "write_raw_text",
]

TAGS = ("O", "B", "I", "E", "S")
O, B, I, E, S = range(5)


@dataclass(frozen=True)
class Token:
    """A surface token: its ``form``, whether a space follows it, and its syntactic ``words``
    (one, the form itself, unless it is a multiword token such as French ``du`` -> ``de le``)."""

    form: str
    space_after: bool
    words: tuple[str, ...]


Paragraph = list[list[Token]]  # sentences of tokens


def _sentence_tokens(rows: list[list[str]], *, path: str, line: int) -> list[Token]:
    tokens: list[Token] = []
    end = 0  # last word id covered by a multiword range
    pending: list[str] | None = None
    for cols in rows:
        if len(cols) != 10:
            raise ValueError(f"{path}:{line}: a token line has {len(cols)} columns, not 10")
        ident, form, misc = cols[0], cols[1], cols[9]
        if "." in ident:
            continue  # empty node: no text
        space = "SpaceAfter=No" not in misc.split("|")
        if "-" in ident:
            last = int(ident.split("-")[1])
            tokens.append(Token(form, space, ()))
            pending, end = [], last
            continue
        if pending is not None and int(ident) <= end:
            pending.append(form)
            if int(ident) == end:
                tokens[-1] = Token(tokens[-1].form, tokens[-1].space_after, tuple(pending))
                pending = None
            continue
        tokens.append(Token(form, space, (form,)))
    return tokens


def read_paragraphs(path: str | os.PathLike) -> Iterator[Paragraph]:
    """The paragraphs of a CoNLL-U file, in order (streamed: one paragraph in memory)."""
    path = str(path)
    paragraph: Paragraph = []
    rows: list[list[str]] = []
    breaks = False
    start = 0
    with open_text(path) as file:
        for number, raw in enumerate(file, start=1):
            line = raw.rstrip("\n")
            if not line.strip():
                if rows:
                    paragraph.append(_sentence_tokens(rows, path=path, line=start))
                    rows, breaks = [], False
                continue
            if not rows:
                start = number
            if line.startswith("#"):
                if line.startswith(("# newpar", "# newdoc")) and paragraph and not breaks:
                    yield paragraph
                    paragraph, breaks = [], True
                continue
            rows.append(line.split("\t"))
    if rows:
        paragraph.append(_sentence_tokens(rows, path=path, line=start))
    if paragraph:
        yield paragraph


def paragraph_tags(paragraph: Paragraph) -> tuple[str, list[int]]:
    """The paragraph's text and one tag per character (module docstring)."""
    chars: list[str] = []
    tags: list[int] = []
    for s, sentence in enumerate(paragraph):
        for t, token in enumerate(sentence):
            last = t == len(sentence) - 1
            form = token.form
            for k, char in enumerate(form):
                if char.isspace():
                    tags.append(O)
                elif k == 0 or form[k - 1].isspace():
                    tags.append(S if last and k == len(form) - 1 else B)
                else:
                    tags.append(E if last and k == len(form) - 1 else I)
                chars.append(" " if char.isspace() else char)
            if token.space_after and not (last and s == len(paragraph) - 1):
                chars.append(" ")
                tags.append(O)
    return "".join(chars), tags


def paragraph_text(paragraph: Paragraph) -> str:
    return paragraph_tags(paragraph)[0]


def write_raw_text(conllu_path: str | os.PathLike, text_path: str | os.PathLike) -> int:
    """Write the file's text, one paragraph per line with a blank line between paragraphs (the
    input ``parser-predict`` and ``Pipeline.parse_file`` read); returns the number of paragraphs."""
    count = 0
    with open(Path(text_path), "w", encoding="utf-8") as out:
        for paragraph in read_paragraphs(conllu_path):
            out.write(("\n" if count else "") + paragraph_text(paragraph) + "\n")
            count += 1
    return count


def spans(paragraphs: Sequence[Paragraph]) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """``(token spans, sentence spans)`` as character offsets over the paragraphs' texts laid end
    to end, whitespace not counted (the official scorer's alignment): for a quick F1 in training."""
    tokens: set[tuple[int, int]] = set()
    sentences: set[tuple[int, int]] = set()
    offset = 0
    for paragraph in paragraphs:
        for sentence in paragraph:
            first = offset
            for token in sentence:
                size = sum(not c.isspace() for c in token.form)
                tokens.add((offset, offset + size))
                offset += size
            sentences.add((first, offset))
    return tokens, sentences
