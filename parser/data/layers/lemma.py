"""LEMMA as edit-script classes (UDPipe 2): each lemma is the script that turns its form into it
(:mod:`parser.data.layers.edit_script`), so one class ("drop a final -s", "lowercase the first
letter") serves every word it fits, seen in training or not.

A predicted script that cannot apply to a form (it deletes more than the form has) falls back to
the form itself: the commonest lemma of an unseen word (numbers, names, foreign words) is its
form. As every layer's, the head chooses among the scripts its dictionary allows
(:meth:`TokenLayer.lexicon`): those seen with the form in training, else with its suffix; the
scripts of a seen form are its training lemmas, as Stanza's dictionary and UDPipe 1's guesser
give them.
"""

from __future__ import annotations

from parser.data.layers.base import TokenLayer, register_layer
from parser.data.layers.edit_script import apply_script, lemma_script

__all__ = ["LemmaLayer"]


@register_layer
class LemmaLayer(TokenLayer):
    """The lemma, one class per edit script from the form."""

    name = "lemma"
    column = "LEMMA"
    values_read_form = True

    def target(self, form: str, value: str) -> str:
        return lemma_script(form, value)

    def value(self, form: str, target: str) -> str | None:
        lemma = apply_script(form, target)
        return form if lemma is None or lemma == "" else lemma
