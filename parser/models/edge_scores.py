"""What every edge scorer returns, and how it becomes a tree distribution.

Conventions: ``arcs[b, dep, head]`` scores the arc ``head -> dep`` (index 0 is ROOT), shape
``[B, N+1, N+1]``; ``labels[b, dep, head, rel]`` scores relation ``rel`` on that arc, shape
``[B, N+1, N+1, L]``. Positions beyond ``lengths[b]`` hold finite values of no meaning: the tree
CRF masks them by ``lengths``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from torch import Tensor

from parser.models.layers import LinearScores
from parser.structs import ParserOutput, ProjectiveTreeCRF, TreeCRF

LABEL_MODES = ("joint", "classifier")
CRF_KINDS = ("matrix_tree", "projective")


@dataclass(frozen=True)
class EdgeScores:
    """arcs: ``[B, dep, head]``; labels: ``[B, dep, head, L]`` (``None``: an unlabeled scorer);
    tags: ``[B, N+1, T]`` UPOS logits of a tag head (``None``: none); layers: ``[B, N+1, C]``
    class scores of each token-level layer by name (:mod:`parser.data.layers`); without autograd
    (prediction) a :class:`~parser.models.layers.LinearScores` that computes them where read.

    A transformation of the arcs or labels is ``dataclasses.replace(scores, arcs=...)``, so that
    the fields it does not touch travel on."""

    arcs: Tensor
    labels: Tensor | None = None
    tags: Tensor | None = None
    layers: Mapping[str, Tensor | LinearScores] = field(default_factory=dict)
    # heads [B, N+1] -> [B, N+1, L]: the labels of those arcs only, where the scorer skipped the
    # grid (labels None; ParserOutput.label_at)
    label_at: Callable[[Tensor], Tensor] | None = None


def to_output(
    edge_scores: EdgeScores, lengths: Tensor, *, labels: str = "joint", single_root: bool = True,
    crf: str = "matrix_tree",
) -> ParserOutput:
    """The tree CRF over a scorer's arcs, labeled jointly or with a separate label classifier.

    ``labels="joint"``: a labeled CRF over the multigraph with scores ``arcs[..., None] + labels``
    (``[B, dep, head, L]``); ``label_scores`` is ``None``. ``labels="classifier"``: the CRF over
    ``arcs`` alone, and ``label_scores = labels`` for a per-arc classifier (Dozat & Manning).
    An unlabeled scorer (``edge_scores.labels is None``) gives the arc CRF in either mode.

    ``crf="matrix_tree"``: the non-projective ``TreeCRF``; ``"projective"``: the
    ``ProjectiveTreeCRF`` (Eisner's inside algorithm; unlabeled arcs, so not with joint labels).
    """
    if labels not in LABEL_MODES:
        raise ValueError(f"labels={labels!r}: expected one of {', '.join(LABEL_MODES)}")
    if crf not in CRF_KINDS:
        raise ValueError(f"crf={crf!r}: expected one of {', '.join(CRF_KINDS)}")
    arcs, rel_scores = edge_scores.arcs, edge_scores.labels
    if rel_scores is not None and rel_scores.shape[:-1] != arcs.shape:
        raise ValueError(
            f"edge_scores.labels has shape {tuple(rel_scores.shape)}; expected "
            f"{tuple(arcs.shape)} + (L,) to match edge_scores.arcs"
        )
    if crf == "projective":
        if rel_scores is not None and labels == "joint":
            raise ValueError("crf='projective' models unlabeled arcs: use labels='classifier' with it")
        return ParserOutput(dist=ProjectiveTreeCRF(arcs, lengths, single_root=single_root),
                            label_scores=rel_scores, label_at=edge_scores.label_at)
    if rel_scores is None and edge_scores.label_at is not None:
        if labels == "joint":
            raise ValueError("labels scored at the heads only (model.label_grid=false) need "
                             "labels='classifier': joint labels are part of the tree CRF")
        return ParserOutput(dist=TreeCRF(arcs, lengths, single_root=single_root),
                            label_at=edge_scores.label_at)
    if rel_scores is None:
        return ParserOutput(dist=TreeCRF(arcs, lengths, single_root=single_root))
    if labels == "joint":
        return ParserOutput(
            dist=TreeCRF(arcs[..., None] + rel_scores, lengths, single_root=single_root)
        )
    return ParserOutput(
        dist=TreeCRF(arcs, lengths, single_root=single_root), label_scores=rel_scores
    )
