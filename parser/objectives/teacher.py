"""The frozen teacher of the self-training terms (``kl``, ``confident_arcs``): its pass over a
batch, checked against the model's distribution, and its pseudo-gold tree.

A teacher is a callable ``Batch -> ParserOutput`` (a ``ParserModel`` loaded by the trainer); it is
called under ``torch.no_grad`` on every unlabeled batch (on the fly: nothing is precomputed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from parser.objectives.base import ParserOutput

if TYPE_CHECKING:
    from parser.data.batch import Batch
    from parser.structs import TreeDistribution

# The teacher's trees a term may train on: its maximum spanning tree, its best projective tree
# (Eisner), or the tree its own decoder gives (a ParserModel's projective / attach_to_units).
TREES = ("mst", "projective", "decoder")

__all__ = ["TREES", "teacher_pass", "teacher_tree"]


def teacher_pass(
    teacher: Callable[[Batch], ParserOutput], batch: Batch, model: TreeDistribution, *, who: str, whole: bool
) -> tuple[ParserOutput, TreeDistribution]:
    """``(the teacher's output, its distribution rebuilt detached on the model's dtype and
    lengths)``: nothing the teacher caches can join the model's graph. ``whole``: the scores must
    match the model's exactly (a KL compares like distributions); otherwise only the arcs
    ``[B, N+1, N+1]`` must (labels may differ or be absent)."""
    with torch.no_grad():
        out = teacher(batch)
    dist = out.dist
    theirs, mine = dist.scores.shape, model.scores.shape
    if (theirs != mine) if whole else (theirs[:3] != mine[:3]):
        raise ValueError(f"{who}: teacher scores {tuple(theirs)} do not match the model's {tuple(mine)}")
    if not torch.equal(dist.lengths, model.lengths):
        raise ValueError(f"{who}: teacher and model lengths differ")
    fresh = type(dist)(dist.scores.detach().to(model.scores.dtype), model.lengths, single_root=dist.single_root)
    return out, fresh


def teacher_tree(
    teacher: Callable[[Batch], ParserOutput], out: ParserOutput, dist: TreeDistribution, batch: Batch,
    *, tree: str, who: str,
) -> Tensor:
    """The teacher's pseudo-gold heads ``[B, N+1]`` (``tree``, one of :data:`TREES`) from its
    output ``out`` and detached distribution ``dist`` (:func:`teacher_pass`)."""
    if tree not in TREES:
        raise ValueError(f"{who}: tree must be one of {TREES}, got {tree!r}")
    if tree == "decoder":
        if not hasattr(teacher, "decoder"):
            raise ValueError(f"{who}: tree='decoder' needs a teacher with a decoder (a ParserModel)")
        return teacher.decoder.decode(out, upos=batch.upos)[0]
    best = dist.argmax(projective=tree == "projective")
    return best[0] if isinstance(best, tuple) else best
