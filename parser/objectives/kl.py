"""Distillation / self-training on unlabeled text: the KL divergence between a frozen teacher's
tree distribution and the model's, per word.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from parser.objectives.base import Output, ParserOutput
from parser.objectives.gold import detached, per_token

if TYPE_CHECKING:
    from parser.data.batch import Batch

DIRECTIONS = ("forward", "reverse")


@dataclass(frozen=True)
class KLToTeacher:
    """``forward``: KL(p_teacher || p_model) (the teacher's trees, mass-covering); ``reverse``:
    KL(p_model || p_teacher) (mode-seeking). ``teacher`` maps a batch to the teacher's
    ``ParserOutput``; it is called under ``torch.no_grad`` and must give a distribution of the
    same shape as the model's (labeled trees when both are joint; label classifiers are not
    compared). Summed over sentences, divided by the number of words. Logs ``loss``, ``value``."""

    teacher: Callable[[Batch], ParserOutput]
    direction: str = "forward"

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"KLToTeacher: direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if not callable(self.teacher):
            raise ValueError(f"KLToTeacher: teacher must be callable Batch -> ParserOutput, got {self.teacher!r}")  # noqa: TRY004 (project convention: bad input is a ValueError)

    def __call__(self, out: ParserOutput, batch: Batch) -> Output:
        model = out.dist
        with torch.no_grad():
            teacher = self.teacher(batch).dist
        if teacher.scores.shape != model.scores.shape:
            raise ValueError(
                f"KLToTeacher: teacher scores {tuple(teacher.scores.shape)} do not match the "
                f"model's {tuple(model.scores.shape)}"
            )
        if not torch.equal(teacher.lengths, model.lengths):
            raise ValueError("KLToTeacher: teacher and model lengths differ")
        # A fresh, detached teacher: nothing it caches can join the model's graph.
        teacher = type(teacher)(
            teacher.scores.detach().to(model.scores.dtype), model.lengths, single_root=teacher.single_root
        )
        values = teacher.kl(model) if self.direction == "forward" else model.kl(teacher)
        loss = per_token(values.sum(), batch)
        return Output(loss, detached(loss=loss, value=loss))
