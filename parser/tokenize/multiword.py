"""Splitting a surface token into its syntactic words (French ``du`` -> ``de le``), learnt from the
training treebank as UDPipe 1 does: a lookup table for the forms seen there, affix rules for the
others.

For each lowercased surface form seen in training, the table keeps the most frequent split when
the form is a multiword token more often than a plain token (French ``des`` is both the article
``des`` and ``de les``: the majority wins), and keeps it whole otherwise. A form never seen is
split by the suffix or prefix rules of :mod:`parser.tokenize.affix_rules` (Tamil and Marathi case
markers and clitics, Spanish ``dímelo``), the one that fits more of its training tokens winning, or
stays one word. Casing follows the surface: ``Du`` -> ``De le``, ``DU`` -> ``DE LE``.

>>> from parser.tokenize.text import Token
>>> table = MultiwordTable.build([[[Token("du", True, ("de", "le")), Token("Du", True, ("De", "le"))]]])
>>> table.split("Du"), table.split("chat")
(('De', 'le'), ('chat',))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from parser.tokenize.affix_rules import SuffixRules
from parser.tokenize.text import Paragraph

__all__ = ["MultiwordTable"]


# Distinct forms whose split is remembered: a text's frequent forms (a tokenizer splits every
# token; the rules cost about 8 us a form), memory bounded over a corpus of any size.
REMEMBERED = 1 << 16


def _lower(text: str) -> str:
    return text.lower()


def _reversed(words: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(w[::-1] for w in reversed(words))


class MultiwordTable:
    """Lowercased surface form -> lowercased words; affix rules for unseen forms."""

    def __init__(self, splits: Mapping[str, tuple[str, ...]], *, suffixes: SuffixRules | None = None,
                 prefixes: SuffixRules | None = None, whole: Iterable[str] = ()) -> None:
        self.splits = {form: tuple(words) for form, words in splits.items()}
        self.suffixes = suffixes or SuffixRules({}, max_suffix=0)
        self.prefixes = prefixes or SuffixRules({}, max_suffix=0)  # over reversed strings
        self.whole = frozenset(whole)  # seen forms kept whole although a rule would split them
        self._remembered: dict[str, tuple[str, ...]] = {}  # form -> split (see REMEMBERED)

    def __len__(self) -> int:
        return len(self.splits)

    @classmethod
    def build(cls, paragraphs: Iterable[Paragraph], **rule_options: float) -> MultiwordTable:
        """From the training paragraphs; ``rule_options`` go to :meth:`SuffixRules.build`."""
        as_split: dict[str, Counter] = {}
        plain: Counter = Counter()
        # the distinct (form, words) as each rule model reads them: an unseen form behaves like the
        # rare forms, so rules count forms, not occurrences (Greek "στο" is frequent, "στ-" not a clitic)
        by_suffix: dict[tuple[str, tuple[str, ...]], None] = {}
        by_prefix: dict[tuple[str, tuple[str, ...]], None] = {}
        for paragraph in paragraphs:
            for sentence in paragraph:
                for token in sentence:
                    form = _lower(token.form)
                    words = tuple(map(_lower, token.words))
                    if len(words) > 1:
                        as_split.setdefault(form, Counter())[words] += 1
                    else:
                        plain[form] += 1
                    # both sides learn from every multiword token: a rule that does not generalise
                    # (Greek "στο" read as a stem "σ" and a suffix "το") fits too few forms to be kept
                    by_suffix[form, words] = None
                    by_prefix[form[::-1], _reversed(words)] = None
        splits = {}
        for form, counts in as_split.items():
            words, _ = min(counts.items(), key=lambda item: (-item[1], item[0]))
            if sum(counts.values()) > plain[form]:
                splits[form] = words
        rules = cls(splits, suffixes=SuffixRules.build(by_suffix, **rule_options),
                    prefixes=SuffixRules.build(by_prefix, **rule_options))
        whole = frozenset(f for f in plain if f not in splits and rules._by_rule(f) is not None)
        return cls(splits, suffixes=rules.suffixes, prefixes=rules.prefixes, whole=whole)

    def _by_rule(self, form: str) -> tuple[str, ...] | None:
        suffix = self.suffixes.split(form)
        prefix = self.prefixes.split(form[::-1])
        if prefix is not None and (suffix is None or prefix[1] > suffix[1]):
            return _reversed(prefix[0])
        return None if suffix is None else suffix[0]

    def split(self, form: str) -> tuple[str, ...]:
        """The words of the surface token ``form`` (itself alone when it is not split)."""
        words = self._remembered.get(form)
        if words is None:
            words = self._split(form)
            if len(self._remembered) < REMEMBERED:
                self._remembered[form] = words
        return words

    def _split(self, form: str) -> tuple[str, ...]:
        lower = _lower(form)
        words = self.splits.get(lower)
        by_rule = words is None and lower not in self.whole
        if by_rule:
            words = self._by_rule(form)  # the stem keeps the form's casing ("ASCII's" -> "ASCII 's")
        if words is None:
            return (form,)
        if form.isupper() and len(form) > 1:
            return tuple(w.upper() for w in words)
        if form[:1].isupper() and not by_rule:
            return (words[0][:1].upper() + words[0][1:], *words[1:])
        return words

    def state_dict(self) -> dict:
        return {"splits": {form: list(words) for form, words in self.splits.items()},
                "suffixes": self.suffixes.state_dict(), "prefixes": self.prefixes.state_dict(),
                "whole": sorted(self.whole)}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> MultiwordTable:
        """Also a table saved before the affix rules existed (lookup only)."""
        rules = {side: SuffixRules.from_state_dict(state[side])
                 for side in ("suffixes", "prefixes") if side in state}
        return cls({form: tuple(words) for form, words in state["splits"].items()}, **rules,
                   whole=state.get("whole", ()))
