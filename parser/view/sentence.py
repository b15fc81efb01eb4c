"""What a picture reads of a CoNLL-U sentence: its words (FORM, LEMMA, UPOS, FEATS, HEAD,
DEPREL and the confidence in MISC), its multiword tokens and its ``sent_id`` / ``text``.

A sentence comes as a ``conllu.TokenList`` (what :meth:`parser.Pipeline.parse` returns), a
:class:`parser.data.conllu_io.Sentence` (what the project's reader returns) or the text of one
CoNLL-U block; all three are read from their CoNLL-U lines, so they draw the same. Empty nodes
(``5.1``, the enhanced graph) are not drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import conllu

from parser.data.conllu_io import Sentence
from parser.data.misc import ALT_HEAD, ALT_HEAD_PROB, DEPREL_PROB, HEAD_PROB, misc_entries

__all__ = ["Confidence", "Multiword", "Tree", "Word", "as_tree", "tree_from_lines"]


@dataclass(frozen=True)
class Confidence:
    """The MISC confidence of one word (None where its key is absent): ``head_prob`` of the head
    written, ``deprel_prob`` of its relation, the runner-up head ``alt_head`` and its
    ``alt_prob`` (:mod:`parser.data.misc` names the keys)."""

    head_prob: float | None = None
    deprel_prob: float | None = None
    alt_head: int | None = None
    alt_prob: float | None = None


@dataclass(frozen=True)
class Word:
    """One syntactic word; ``head`` None where HEAD is ``_``; text columns None where ``_``."""

    id: int
    form: str
    lemma: str | None
    upos: str | None
    feats: str | None
    head: int | None
    deprel: str | None
    confidence: Confidence


@dataclass(frozen=True)
class Multiword:
    """A multiword token: words ``first``..``last`` written as ``form`` in the text."""

    first: int
    last: int
    form: str


@dataclass(frozen=True)
class Tree:
    words: tuple[Word, ...]
    multiwords: tuple[Multiword, ...]
    sent_id: str | None
    text: str | None

    @property
    def forms(self) -> list[str]:
        return [word.form for word in self.words]


def as_tree(sentence: conllu.TokenList | Sentence | str | Tree, *, where: str = "sentence") -> Tree:
    """The :class:`Tree` of a ``conllu.TokenList``, a project :class:`Sentence` or CoNLL-U text.

    >>> tree = as_tree("1\\tHi\\thi\\tINTJ\\t_\\t_\\t0\\troot\\t_\\tHeadProb=0.9000\\n")
    >>> tree.words[0].deprel, tree.words[0].confidence.head_prob
    ('root', 0.9)
    """
    if isinstance(sentence, Tree):
        return sentence
    if isinstance(sentence, Sentence):
        return tree_from_lines(sentence.lines, where=sentence.path, first_line=sentence.line)
    if isinstance(sentence, conllu.TokenList):
        return tree_from_lines(sentence.serialize().split("\n"), where=where)
    if isinstance(sentence, str):
        return tree_from_lines(sentence.split("\n"), where=where)
    raise TypeError(f"{where}: expected a conllu.TokenList, a parser Sentence or CoNLL-U text, "
                    f"got {type(sentence).__name__}")


def tree_from_lines(lines: Sequence[str], *, where: str = "sentence", first_line: int = 1) -> Tree:
    """The :class:`Tree` of one CoNLL-U block's lines (blank lines ignored); a malformed line is
    a ``ValueError`` naming ``where`` and its line number (counted from ``first_line``)."""
    words: list[Word] = []
    multiwords: list[Multiword] = []
    comments: dict[str, str] = {}
    for number, raw in enumerate(lines, start=first_line):
        if not raw.strip():
            continue
        if raw.startswith("#"):
            key, sep, value = raw[1:].partition("=")
            bare = raw[1:].split(None, 1)
            if not sep and len(bare) == 2 and bare[0] == "sent_id":  # "# sent_id x" (UD 1)
                key, sep, value = bare[0], "=", bare[1]
            if sep and key.strip() not in comments:
                comments[key.strip()] = value.strip()
            continue
        cols = raw.split("\t")
        if len(cols) != 10:
            raise ValueError(f"{where}:{number}: {len(cols)} tab-separated columns, expected 10")
        ident = cols[0]
        if "." in ident:  # an empty node: the enhanced graph only
            continue
        if "-" in ident:
            first, _, last = ident.partition("-")
            multiwords.append(Multiword(_int(first, where, number), _int(last, where, number),
                                        cols[1]))
            continue
        word_id = _int(ident, where, number)
        if word_id != len(words) + 1:
            raise ValueError(f"{where}:{number}: word id {ident}, expected {len(words) + 1}")
        head = None if cols[6] == "_" else _int(cols[6], where, number)
        words.append(Word(word_id, cols[1], _value(cols[2]), _value(cols[3]), _value(cols[5]),
                          head, _value(cols[7]), _confidence(cols[9], where, number)))
    if not words:
        raise ValueError(f"{where}:{first_line}: a sentence without words")
    for word in words:
        if word.head is not None and not 0 <= word.head <= len(words):
            raise ValueError(f"{where}: head {word.head} of word {word.id} is not in "
                             f"0..{len(words)}")
    return Tree(tuple(words), tuple(multiwords), comments.get("sent_id"), comments.get("text"))


def _confidence(misc: str, where: str, number: int) -> Confidence:
    entries = misc_entries(misc)
    if not any(key in entries for key in (HEAD_PROB, DEPREL_PROB, ALT_HEAD, ALT_HEAD_PROB)):
        return Confidence()
    return Confidence(_prob(entries, HEAD_PROB, where, number),
                      _prob(entries, DEPREL_PROB, where, number),
                      None if entries.get(ALT_HEAD) in (None, "")
                      else _int(entries[ALT_HEAD], where, number),
                      _prob(entries, ALT_HEAD_PROB, where, number))


def _prob(entries: dict[str, str], key: str, where: str, number: int) -> float | None:
    text = entries.get(key)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{where}:{number}: MISC {key}={text!r} is not a probability")
    return value


def _int(text: str, where: str, number: int) -> int:
    if not text.isdigit():
        raise ValueError(f"{where}:{number}: {text!r} is not a word id")
    return int(text)


def _value(text: str) -> str | None:
    return None if text == "_" else text
