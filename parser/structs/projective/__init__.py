"""Projective trees: Eisner's chart (:mod:`.eisner`: best tree and the shared chart) and the
projective tree CRF over it (:mod:`.crf`)."""

from __future__ import annotations

from parser.structs.projective.crf import ProjectiveTreeCRF, is_projective
from parser.structs.projective.eisner import eisner

__all__ = ["ProjectiveTreeCRF", "eisner", "is_projective"]
