"""The non-projective tree CRF (matrix-tree theorem): :class:`TreeCRF`, its LU fast path with the
trust test (:mod:`.laplacian`, :mod:`.trust`, :mod:`.one_sentence`), the log-space elimination
fallback (:mod:`.elimination`), the route between them (:mod:`.partition`), second order
(:mod:`.lu_second_order`, :mod:`.expectations`) and exact sampling (:mod:`.sampling`)."""

from __future__ import annotations

from parser.structs.tree.crf import TreeCRF
from parser.structs.tree.sampling import sample_trees

__all__ = ["TreeCRF", "sample_trees"]
