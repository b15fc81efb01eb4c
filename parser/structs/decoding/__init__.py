"""Decoders over scores: maximum spanning tree (:mod:`.mst`, Chu-Liu/Edmonds with the root
constraint) and the punct/cc re-attachment rule (:mod:`.unit_attachment`). The best projective
tree is :func:`parser.structs.projective.eisner`; exact sampling :func:`parser.structs.tree.sample_trees`."""

from __future__ import annotations

from parser.structs.decoding.mst import NoTreeError, maximum_spanning_tree
from parser.structs.decoding.unit_attachment import attach_to_units

__all__ = ["NoTreeError", "attach_to_units", "maximum_spanning_tree"]
