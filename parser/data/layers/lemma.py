"""LEMMA as edit-script classes (UDPipe 2): each lemma is the script that turns its form into it
(:mod:`parser.data.layers.edit_script`), so one class ("drop a final -s", "lowercase the first
letter") serves every word it fits, seen in training or not.

A predicted script that cannot apply to a form (it deletes more than the form has), or a form in
a script never seen in training, falls back to the form itself: the commonest lemma of an unseen
word (numbers, names, foreign words) is its form. A form seen in training takes its most frequent
training lemma instead (the lexicon, as Stanza's dictionary and UDPipe 1's guesser do): chosen on
ta_ttb dev, where the release recipe's head got 89.5% of the seen words' lemmas and the lexicon
99.1% (57.8% of the unseen, 38% of the words; docs/layout.md).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from parser.data.conllu_io import Sentence
from parser.data.layers.base import TokenLayer, register_layer
from parser.data.layers.edit_script import apply_script, lemma_script

__all__ = ["LemmaLayer"]


@register_layer
class LemmaLayer(TokenLayer):
    """The lemma, one class per edit script from the form."""

    name = "lemma"
    column = "LEMMA"

    def target(self, form: str, value: str) -> str:
        return lemma_script(form, value)

    def value(self, form: str, target: str) -> str | None:
        lemma = apply_script(form, target)
        return form if lemma is None or lemma == "" else lemma

    def lexicon(self, sentences: Iterable[Sentence]) -> dict[str, str]:
        """Each training form's most frequent lemma (ties: the first alphabetically).

        >>> LemmaLayer().lexicon([])
        {}
        """
        counts: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for sentence in sentences:
            for form, lemma in zip(sentence.forms, sentence.column(self.column)):
                if lemma is not None:
                    counts[form][lemma] += 1
        return {form: min(lemmas, key=lambda lemma: (-lemmas[lemma], lemma))
                for form, lemmas in counts.items()}
