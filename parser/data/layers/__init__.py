"""Token-level annotation layers: UPOS, XPOS, FEATS, LEMMA.

Importing the package registers the built-in layers (:data:`LAYERS`); see :mod:`.base`.
"""

from parser.data.layers.base import (
    LAYERS,
    WRITTEN_COLUMNS,
    Dictionary,
    TokenLayer,
    encode_targets,
    layer_of,
    register_layer,
)
from parser.data.layers.lemma import LemmaLayer
from parser.data.layers.tags import FactoredFeatsLayer, FeatsLayer, UposColumn, XposLayer

__all__ = ["LAYERS", "WRITTEN_COLUMNS", "Dictionary", "FactoredFeatsLayer", "FeatsLayer", "LemmaLayer", "TokenLayer", "UposColumn", "XposLayer", "encode_targets",
           "layer_of", "register_layer"]
