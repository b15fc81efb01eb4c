"""XPOS and FEATS: whole-string classes, one softmax head each (as UDPipe 2).

FEATS as one class per whole feature string rather than one classifier per feature (Stanza):
the string is what MLAS scores (a word counts only when every feature is right), and a class per
string cannot predict a combination never seen in training, which a factored head can.
``feats_factored`` keeps the whole-string classes but scores each as the sum of its features'
scores (:class:`FactoredLinear`), so that strings sharing a feature share what is learned of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from parser.data.layers.base import UNDERSCORE, TokenLayer, register_layer
from parser.data.vocab import SPECIALS

__all__ = ["FactoredLinear", "FeatsLayer", "FactoredFeatsLayer", "UposColumn", "XposLayer"]


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


@register_layer
class FactoredFeatsLayer(FeatsLayer):
    """FEATS as :class:`FeatsLayer` (whole-string classes, the same dictionary and decoding), each
    class scored by :class:`FactoredLinear`: the sum of one vector per feature (its value, or
    "absent") and a bias of the class. A rare string borrows what its features learned in the
    frequent ones; only strings seen in training are predicted. ``model.layers=[xpos,
    feats_factored,lemma]`` instead of ``feats``."""

    name = "feats_factored"

    def head(self, n_states: int, n_classes: int, classes: Sequence[str] | None = None) -> nn.Module:
        if classes is None or len(classes) != n_classes:
            raise ValueError(f"{self.name}: the head needs the {n_classes} class strings "
                             "(build_parser(layer_vocabs=vocabs.layers))")
        return FactoredLinear(n_states, classes)


class FactoredLinear(nn.Module):
    """``[..., n_in] -> [..., C]`` scores of whole FEATS strings ``classes`` (the vocabulary's,
    specials first), a linear head whose class ``c``'s weight row is the sum of the rows of its
    (feature, value) pairs and of "feature absent" for every other feature seen in training:
    ``weight = pairs @ factor_weight``, ``bias = pairs @ factor_bias + class_bias``. ``weight``
    and ``bias`` are those of an ``nn.Linear``, so the lazy prediction path reads it as one
    (:class:`parser.models.layers.LinearScores`)."""

    def __init__(self, n_in: int, classes: Sequence[str]) -> None:
        super().__init__()
        parsed = [feature_pairs(c) for c in classes]
        features = sorted({f for pairs in parsed for f, _ in pairs})
        values = {f: sorted({v for pairs in parsed for g, v in pairs if g == f}) for f in features}
        columns = {(f, v): k for k, (f, v) in enumerate(
            (f, v) for f in features for v in [None, *values[f]])}  # None: the feature is absent
        pairs = torch.zeros(len(classes), len(columns))
        for row, found in enumerate(parsed):
            present = dict(found)
            for f in features:
                pairs[row, columns[f, present.get(f)]] = 1.0
        self.register_buffer("pairs", pairs)  # [C, V]: the checkpoint keeps the factorisation
        self.factor_weight = nn.Parameter(torch.empty(len(columns), n_in))
        self.factor_bias = nn.Parameter(torch.zeros(len(columns)))
        self.class_bias = nn.Parameter(torch.zeros(len(classes)))
        bound = 1.0 / max(n_in, 1) ** 0.5  # nn.Linear's start, shared over the features
        nn.init.uniform_(self.factor_weight, -bound / max(len(features), 1) ** 0.5,
                         bound / max(len(features), 1) ** 0.5)

    @property
    def weight(self) -> Tensor:
        return self.pairs @ self.factor_weight

    @property
    def bias(self) -> Tensor:
        return self.pairs @ self.factor_bias + self.class_bias

    def forward(self, x: Tensor) -> Tensor:
        return nn.functional.linear(x, self.weight, self.bias)


def feature_pairs(value: str) -> list[tuple[str, str]]:
    """``Case=Nom|Number=Sing`` -> ``[("Case", "Nom"), ("Number", "Sing")]``; ``_`` and the
    vocabulary's specials have none (a multi-valued ``Case=Acc,Nom`` is one value)."""
    if value == UNDERSCORE or value in SPECIALS:
        return []
    return [tuple(item.split("=", 1)) if "=" in item else (item, "") for item in value.split("|")]
