"""Does a text file look whitespace-tokenised? ``parser-predict`` without a tokenizer refuses raw
text instead of parsing ``good.`` or ``can't`` as one word.

A word looks untokenised when punctuation is glued to it: ``, ; ! ?`` (or ``:``) at its end,
``.`` at the end of a line's last word (``Mr.`` inside a line is an abbreviation and passes;
``U.S.`` anywhere passes), an English contraction (``can't``, ``it's``, ``we're``), or an opening
quote or bracket glued to its start (``"hi``, ``(see``).

>>> untokenised_word(["I", "like", "it", "."]), untokenised_word(["It", "was", "good."])
(None, 'good.')
>>> untokenised_word(["I", "can't", "go", "!"]), untokenised_word(["Mr.", "Smith", "left", "U.S."])
("can't", None)
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from parser.data.text_files import open_text

__all__ = ["first_untokenised_line", "untokenised_word"]

_GLUED_END = re.compile(r"^[^\W_][\w'-]*[,;!?:]+[\"')\]]*$")
_GLUED_START = re.compile(r"^[\"(\[][^\W_]+$")  # not ': 's, 're are tokens
_CONTRACTION = re.compile(r"^[^\W_]+(n't|'s|'re|'ve|'ll|'d|'m)$", re.IGNORECASE)
_FINAL_DOT = re.compile(r"^[^\W_][\w'-]*[^\W_]\.[\"')\]]*$")


def untokenised_word(words: Sequence[str]) -> str | None:
    """The first word of one line's ``words`` that looks untokenised, or None."""
    for i, word in enumerate(words):
        if _GLUED_END.match(word) or _GLUED_START.match(word) or _CONTRACTION.match(word):
            return word
        if i == len(words) - 1 and _FINAL_DOT.match(word) and "." not in word[:-1]:
            return word
    return None


def first_untokenised_line(path: str | os.PathLike) -> tuple[int, str] | None:
    """``(1-based line, word)`` of the first line of a text file holding an untokenised word."""
    with open_text(path) as file:
        for number, line in enumerate(file, start=1):
            word = untokenised_word(line.split())
            if word is not None:
                return number, word
    return None
