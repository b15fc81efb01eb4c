"""Decoders over scores: maximum spanning tree (:mod:`.mst`, Chu-Liu/Edmonds with the root
constraint), the exact k best trees (:mod:`.kbest`), the punct/cc re-attachment rule
(:mod:`.unit_attachment`) and projective punctuation by the scores (:mod:`.punct_attachment`). The best projective tree is :func:`parser.structs.projective.eisner`; exact sampling :func:`parser.structs.tree.sample_trees`."""

from __future__ import annotations

from parser.structs.decoding.kbest import KBestTrees, k_best_trees
from parser.structs.decoding.mst import NoTreeError, maximum_spanning_tree
from parser.structs.decoding.punct_attachment import attach_punct_projectively
from parser.structs.decoding.unit_attachment import attach_to_units

__all__ = [
    "KBestTrees", "NoTreeError", "attach_punct_projectively", "attach_to_units", "k_best_trees",
    "maximum_spanning_tree",
]
