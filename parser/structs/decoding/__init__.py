"""Decoders over scores: maximum spanning tree (:mod:`.mst`, Chu-Liu/Edmonds with the root
constraint), the exact k best trees (:mod:`.kbest`) and the punct/cc re-attachment rule
(:mod:`.unit_attachment`). The best projective tree is :func:`parser.structs.projective.eisner`; exact sampling :func:`parser.structs.tree.sample_trees`."""

from __future__ import annotations

from parser.structs.decoding.kbest import KBestTrees, k_best_trees
from parser.structs.decoding.mst import NoTreeError, maximum_spanning_tree
from parser.structs.decoding.unit_attachment import attach_to_units

__all__ = ["KBestTrees", "NoTreeError", "attach_to_units", "k_best_trees", "maximum_spanning_tree"]
