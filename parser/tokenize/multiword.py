"""Splitting a surface token into its syntactic words (French ``du`` -> ``de le``), learnt as a
lookup table from the training treebank, as UDPipe 1 does for frequent multiword tokens.

For each lowercased surface form, the table keeps the most frequent split seen in training when
the form is a multiword token more often than a plain token (French ``des`` is both the article
``des`` and ``de les``: the majority wins). Any other token stays one word: no split is guessed for
a form never seen as a multiword token (UDPipe 1's suffix rules, e.g. Spanish clitics, are not
learnt). Casing follows the surface: ``Du`` -> ``De le``, ``DU`` -> ``DE LE``.

>>> from parser.tokenize.text import Token
>>> table = MultiwordTable.build([[[Token("du", True, ("de", "le")), Token("Du", True, ("De", "le"))]]])
>>> table.split("Du"), table.split("chat")
(('De', 'le'), ('chat',))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from parser.tokenize.text import Paragraph

__all__ = ["MultiwordTable"]


def _lower(text: str) -> str:
    return text.lower()


class MultiwordTable:
    """Lowercased surface form -> lowercased words."""

    def __init__(self, splits: Mapping[str, tuple[str, ...]]) -> None:
        self.splits = {form: tuple(words) for form, words in splits.items()}

    def __len__(self) -> int:
        return len(self.splits)

    @classmethod
    def build(cls, paragraphs: Iterable[Paragraph]) -> MultiwordTable:
        as_split: dict[str, Counter] = {}
        plain: Counter = Counter()
        for paragraph in paragraphs:
            for sentence in paragraph:
                for token in sentence:
                    form = _lower(token.form)
                    if len(token.words) > 1:
                        as_split.setdefault(form, Counter())[tuple(map(_lower, token.words))] += 1
                    else:
                        plain[form] += 1
        splits = {}
        for form, counts in as_split.items():
            words, _ = min(counts.items(), key=lambda item: (-item[1], item[0]))
            if sum(counts.values()) > plain[form]:
                splits[form] = words
        return cls(splits)

    def split(self, form: str) -> tuple[str, ...]:
        """The words of the surface token ``form`` (itself alone when the table has no split)."""
        words = self.splits.get(_lower(form))
        if words is None:
            return (form,)
        if form.isupper() and len(form) > 1:
            return tuple(w.upper() for w in words)
        if form[:1].isupper():
            return (words[0][:1].upper() + words[0][1:], *words[1:])
        return words

    def state_dict(self) -> dict:
        return {"splits": {form: list(words) for form, words in self.splits.items()}}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> MultiwordTable:
        return cls({form: tuple(words) for form, words in state["splits"].items()})
