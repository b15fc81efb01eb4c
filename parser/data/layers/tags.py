"""XPOS and FEATS: whole-string classes, one softmax head each (as UDPipe 2).

FEATS as one class per whole feature string rather than one classifier per feature (Stanza):
the string is what MLAS scores (a word counts only when every feature is right), and a class per
string cannot predict a combination never seen in training, which a factored head can.
"""

from __future__ import annotations

from parser.data.layers.base import TokenLayer, register_layer

__all__ = ["FeatsLayer", "UposColumn", "XposLayer"]


@register_layer
class XposLayer(TokenLayer):
    """The language-specific tag (XPOS), one class per tag string."""

    name = "xpos"
    column = "XPOS"


@register_layer
class FeatsLayer(TokenLayer):
    """The morphological features (FEATS), one class per whole feature string; ``_`` (no
    feature) is a class of its own."""

    name = "feats"
    column = "FEATS"
    underscore_is_value = True


class UposColumn(TokenLayer):
    """UPOS as the biaffine parser's joint tag head predicts it: not a layer (not registered;
    docs/layout.md says why), only the dictionary its tags are decoded through, of the forms seen
    in training. No suffixes: on hu_szeged dev they cost 4.3 points of UPOS on unseen words
    (experiments/results/layer_dictionary.md)."""

    name = "upos"
    column = "UPOS"
    suffix_length = 0
