"""Splitting an unseen multiword token by its ending: suffix rules learnt from a treebank's
multiword tokens, the way UDPipe 1 splits productive clitics and case markers (Tamil
``நிலையத்துக்கான`` -> ``நிலையத்துக்க் ஆன``, Marathi ``लाडामुळे`` -> ``लाडा मुळे``).

A multiword token whose first word shares a stem with it (``p`` characters) gives a rule for each of
its endings that contains the rest: ending ``form[-L:]`` -> drop it, append the first word's tail,
then the other words. Every training token counts towards each of its endings (up to
``max_suffix`` characters, one stem character always left). A form is split by its longest ending
seen at least ``min_count`` times: by that ending's most frequent rule when more than ``share`` of
the tokens with the ending were split by it, not at all otherwise (a backed-off suffix model, as
TnT's). Prefix rules (a proclitic before the stem, Arabic ``وقال`` -> ``و قال``) are the same model
over reversed strings; :class:`parser.tokenize.multiword.MultiwordTable` asks both.

Only endings whose decision differs from the one a shorter ending gives are stored.

>>> rules = SuffixRules.build([("casamento", ("casamento",))] * 3 + [("dime", ("di", "me"))] * 2
...                           + [("hazme", ("haz", "me"))] * 2, min_count=2)
>>> rules.split("cuentame"), rules.split("casa")
((('cuenta', 'me'), 1.0), None)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping

__all__ = ["SuffixRules", "common_prefix"]

Rule = tuple[int, str, tuple[str, ...]]  # characters dropped, first word's tail, later words


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _normal(ending: str, tail: str, rest: tuple[str, ...]) -> Rule:
    """The same rule with the characters that ending and tail share kept in the stem."""
    k = common_prefix(ending, tail)
    return (len(ending) - k, tail[k:], rest)


class SuffixRules:
    """Ending -> (rule or ``None`` for no split, the share of the ending's tokens it fits)."""

    def __init__(self, endings: Mapping[str, tuple[Rule | None, float]], *, max_suffix: int) -> None:
        self.endings = dict(endings)
        self.max_suffix = max_suffix

    def __len__(self) -> int:
        return len(self.endings)

    @classmethod
    def build(cls, tokens: Iterable[tuple[str, tuple[str, ...]]], *, max_suffix: int = 8,
              min_count: int = 2, share: float = 0.5) -> SuffixRules:
        """From (form, words) of every training token; forms already lowercased."""
        totals: Counter = Counter()
        rules: dict[str, Counter] = defaultdict(Counter)
        for form, words in tokens:
            longest = min(max_suffix, len(form) - 1)
            for length in range(1, longest + 1):
                totals[form[-length:]] += 1
            if len(words) < 2:
                continue
            stem = common_prefix(form, words[0])
            if stem == 0:
                continue
            for length in range(max(1, len(form) - stem), longest + 1):
                ending = form[-length:]
                tail = words[0][len(form) - length:]
                rules[ending][_normal(ending, tail, tuple(words[1:]))] += 1
        decided: dict[str, tuple[Rule | None, float]] = {}
        for ending in sorted((e for e, n in totals.items() if n >= min_count), key=len):
            best = min(rules[ending].items(), key=lambda kv: (-kv[1], kv[0]), default=None)
            fits = best[1] / totals[ending] if best else 0.0
            decision = (best[0], fits) if best and fits > share else (None, 1.0 - fits)
            if decision[0] != cls._backoff(decided, ending)[0]:
                decided[ending] = decision
        return cls(decided, max_suffix=max_suffix)

    @staticmethod
    def _backoff(endings: Mapping[str, tuple[Rule | None, float]],
                 ending: str) -> tuple[Rule | None, float]:
        for length in range(len(ending) - 1, 0, -1):
            if ending[-length:] in endings:
                return endings[ending[-length:]]
        return (None, 1.0)

    def split(self, form: str) -> tuple[tuple[str, ...], float] | None:
        """The words of ``form`` and the rule's share, or ``None`` (no split). Endings are
        looked up lowercased; the stem keeps the form's own casing."""
        lower = form.lower()
        if len(lower) != len(form):  # a character whose lowercase is longer (Turkish "İ")
            form = lower
        longest = min(self.max_suffix, len(form) - 1)
        rule, fits = self._backoff(self.endings, lower[-longest - 1:]) if longest > 0 else (None, 1.0)
        if rule is None:
            return None
        dropped, tail, rest = rule
        first = form[: len(form) - dropped] + tail
        return ((first, *rest), fits) if first else None

    def state_dict(self) -> dict:
        return {"max_suffix": self.max_suffix,
                "endings": [[e, None if r is None else [r[0], r[1], list(r[2])], f]
                            for e, (r, f) in self.endings.items()]}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> SuffixRules:
        endings = {e: (None if r is None else (int(r[0]), r[1], tuple(r[2])), float(f))
                   for e, r, f in state["endings"]}
        return cls(endings, max_suffix=int(state["max_suffix"]))
