"""Distributions over structures (imports torch only).

``TreeCRF`` is the exact non-projective dependency tree CRF; see :mod:`parser.structs.tree_crf`.
"""

from __future__ import annotations

from parser.structs.tree_crf import TreeCRF

__all__ = ["TreeCRF"]
