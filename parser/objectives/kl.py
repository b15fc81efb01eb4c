"""Distillation / self-training on unlabeled text: the KL divergence between a frozen teacher's
tree distribution and the model's, per word; or, with ``tree``, the model's negative
log-likelihood of the teacher's best tree (hard self-training on pseudo-gold trees, McClosky et
al. 2006), which is the KL from a point mass on that tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from parser.objectives.base import Output, ParserOutput
from parser.objectives.gold import detached, per_token
from parser.objectives.registry import Resources, register
from parser.objectives.teacher import TREES, teacher_pass, teacher_tree

if TYPE_CHECKING:
    from parser.data.batch import Batch

DIRECTIONS = ("forward", "reverse")


@dataclass(frozen=True)
class KLOptions:
    """The options of a ``kl`` term: ``direction``, ``tree`` (see ``KLToTeacher``) and
    ``checkpoint``, the teacher the trainer loads and passes as ``teacher=``."""

    direction: str = "forward"
    tree: str | None = None
    checkpoint: str | None = None


@register("kl", stream="unlabeled", needs=("teacher",), options=KLOptions)
@dataclass(frozen=True)
class KLToTeacher:
    """``forward``: KL(p_teacher || p_model) (the teacher's trees, mass-covering); ``reverse``:
    KL(p_model || p_teacher) (mode-seeking). ``teacher`` maps a batch to the teacher's
    ``ParserOutput``; it is called under ``torch.no_grad`` and must give a distribution of the
    same shape as the model's (labeled trees when both are joint; label classifiers are not
    compared). Summed over sentences, divided by the number of words. Logs ``loss``, ``value``.

    ``tree``: ``None`` (the whole teacher distribution), ``"mst"`` or ``"projective"``: the
    teacher's maximum spanning tree or best projective tree (Eisner) as a pseudo-gold tree, the
    loss being ``-log p_model(tree)`` (forward direction only: a point mass has no reverse KL);
    ``"decoder"``: the tree the teacher's own decoder gives (``teacher.decoder.decode(out, upos=...)``, a
    ``ParserModel``'s: its ``projective`` and ``attach_to_units`` settings).
    A projective pseudo-tree hands the student the teacher's decoding prior as well as its arcs."""

    teacher: Callable[[Batch], ParserOutput]
    direction: str = "forward"
    tree: str | None = None

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"KLToTeacher: direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.tree is not None and self.tree not in TREES:
            raise ValueError(f"KLToTeacher: tree must be one of {(None, *TREES)}, got {self.tree!r}")
        if self.tree is not None and self.direction != "forward":
            raise ValueError(f"KLToTeacher: tree={self.tree!r} needs direction 'forward' (the KL from the tree)")
        if not callable(self.teacher):
            raise ValueError(f"KLToTeacher: teacher must be callable Batch -> ParserOutput, got {self.teacher!r}")  # noqa: TRY004 (project convention: bad input is a ValueError)

    @classmethod
    def from_options(cls, options: KLOptions, resources: Resources) -> KLToTeacher:
        return cls(resources.teacher, direction=options.direction, tree=options.tree)

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        model = out.dist
        # A tree needs only the arcs [B, N+1, N+1] to match; a KL compares like distributions.
        teacher_out, teacher = teacher_pass(self.teacher, batch, model, who="KLToTeacher", whole=self.tree is None)
        if self.tree is None and type(teacher) is not type(model):
            raise ValueError(
                f"KLToTeacher: the teacher's {type(teacher).__name__} and the model's "
                f"{type(model).__name__} differ (model.crf): a KL compares like distributions; train "
                "the teacher with this run's model.crf, or take its trees (tree=mst, projective or decoder)"
            )
        if self.tree is not None:
            heads = teacher_tree(self.teacher, teacher_out, teacher, batch, tree=self.tree, who="KLToTeacher")
            values = -model.log_prob(heads)  # a labeled CRF sums the tree's labels out
            if bool(torch.isinf(values).any()):
                raise ValueError(
                    f"KLToTeacher: tree={self.tree!r} gave {int(torch.isinf(values).sum())} pseudo-gold "
                    f"trees to which the model's {type(model).__name__} gives probability 0 (a crossing "
                    "tree under model.crf=projective): use tree=projective"
                )
        else:
            values = teacher.kl(model) if self.direction == "forward" else model.kl(teacher)
        loss = per_token(values.sum(), batch)
        return Output(loss, detached(loss=loss, value=loss))

