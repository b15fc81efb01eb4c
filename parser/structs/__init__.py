"""Distributions over structures (imports torch only).

- :mod:`.tree`: :class:`TreeCRF`, the exact non-projective dependency tree CRF (matrix-tree
  theorem: LU fast path, trust test, log-space elimination), exact tree sampling;
- :mod:`.projective`: :class:`ProjectiveTreeCRF` and Eisner's best projective tree;
- :mod:`.chain`: :class:`LinearChainCRF` over tag sequences;
- :mod:`.decoding`: maximum spanning tree, exact k best trees, the punct/cc re-attachment rule;
- :mod:`.reference`: slow published algorithms (tests and benchmarks only);
- :mod:`.common`: the shared input check, masks and log-space helpers;
- :class:`TreeDistribution` (the protocol both tree CRFs satisfy) and :class:`ParserOutput`.

>>> import torch
>>> from parser.structs import TreeCRF, ProjectiveTreeCRF, LinearChainCRF
>>> dist = TreeCRF(torch.zeros(1, 3, 3), torch.tensor([2]))
>>> round(float(dist.log_partition[0].exp()))  # two words, one root child: 2 trees
2
"""

from __future__ import annotations

from parser.structs.chain import LinearChainCRF
from parser.structs.decoding import (
    KBestTrees,
    NoTreeError,
    attach_punct_projectively,
    attach_to_units,
    k_best_trees,
    maximum_spanning_tree,
)
from parser.structs.distribution import TreeDistribution
from parser.structs.parser_output import ParserOutput, divided_label_at
from parser.structs.projective import ProjectiveTreeCRF, eisner, is_projective
from parser.structs.tree import TreeCRF, sample_trees

__all__ = [
    "KBestTrees", "LinearChainCRF", "NoTreeError", "ParserOutput", "ProjectiveTreeCRF", "TreeCRF",
    "TreeDistribution", "attach_punct_projectively", "attach_to_units", "divided_label_at", "eisner",
    "is_projective", "k_best_trees",
    "maximum_spanning_tree", "sample_trees",
]
