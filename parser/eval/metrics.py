"""Attachment scores on tensors, computed as the CoNLL 2018 shared task does on gold tokenisation.

Every syntactic word counts, punctuation included; LAS compares only the universal part of the
relation (``nmod:poss`` and ``nmod`` are the same label); words whose gold head is ``-1``
(unannotated) are left out. With gold tokenisation the official script's UAS/LAS F1 equal these
accuracies exactly. All scores are percentages, floats in 0..100 (``nan`` when nothing was counted).

Tensor layout follows the project convention: ``heads[b, dep]`` and ``rels[b, dep]``, ``[B, N+1]``,
position 0 is ROOT and ignored, positions beyond ``lengths[b]`` are padding and ignored.

>>> import torch
>>> metric = AttachmentMetric()
>>> gold_heads = torch.tensor([[0, 2, 0, 2]])
>>> pred_heads = torch.tensor([[0, 2, 0, 1]])
>>> gold_rels = torch.tensor([[0, 1, 2, 3]])
>>> pred_rels = torch.tensor([[0, 1, 2, 1]])
>>> metric.update(pred_heads, pred_rels, gold_heads, gold_rels, torch.tensor([3]))
>>> scores = metric.compute()
>>> round(scores["uas"], 2), round(scores["las"], 2), scores["n_words"]
(66.67, 66.67, 3)
>>> metric.sentence_counts().tolist()  # per sentence: words, heads right, heads and labels right
[[3, 2, 2]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["LENGTH_BUCKETS", "AttachmentMetric", "universal_relations"]

# Sentence-length buckets (in words) for `AttachmentMetric.by_length`; None means no upper bound.
LENGTH_BUCKETS: tuple[tuple[int, int | None], ...] = ((1, 10), (11, 20), (21, 30), (31, 40), (41, None))

# Columns of the per-relation count table.
_GOLD, _PRED, _HEAD, _LABELED = range(4)


def universal_relations(names: Sequence[str]) -> tuple[Tensor, list[str]]:
    """Map each relation name to the id of its universal part (the text before ``:``).

    Returns ``rel_universal`` ``[L]`` (long; relation id -> universal id) and the universal names,
    indexed by universal id, in order of first appearance.

    >>> rel_universal, universal = universal_relations(["nmod", "nmod:poss", "obl:tmod", "root"])
    >>> rel_universal.tolist(), universal
    ([0, 0, 1, 2], ['nmod', 'obl', 'root'])
    """
    index: dict[str, int] = {}
    ids = []
    for name in names:
        base = name.split(":")[0]
        ids.append(index.setdefault(base, len(index)))
    return torch.tensor(ids, dtype=torch.long), list(index)


def _percent(correct: int, total: int) -> float:
    # 100 * (c / n), the order the official script uses, so equal counts give equal floats.
    return 100 * (correct / total) if total else math.nan


def _first_bad(name: str, bad: Tensor, values: Tensor, allowed: str) -> ValueError:
    b, position = (int(i) for i in bad.nonzero()[0])
    value = int(values[b, position])
    return ValueError(f"{name}[{b}, {position}] = {value}: outside {allowed} (sentence {b}, word {position})")


class AttachmentMetric:
    """Accumulates UAS, LAS and label accuracy over batches, with breakdowns by sentence length and
    by gold relation.

    Call `update` once per batch, then `compute`, `by_length` or `by_relation`; `reset` starts
    over. Labels are optional: pass ``pred_rels=None`` to score heads only (LAS and label accuracy
    are then ``None``); every update of one accumulation must then agree on that.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._labeled: bool | None = None
        self._words = 0
        self._head = 0
        self._labeled_correct = 0
        self._label = 0
        # [bucket, (sentences, words, head correct, labeled correct)]
        self._lengths = torch.zeros(len(LENGTH_BUCKETS), 4, dtype=torch.long)
        # [universal relation, (gold, predicted, head correct, labeled correct)]
        self._relations = torch.zeros(0, 4, dtype=torch.long)
        # per batch: [B, (words, head correct, labeled correct)], for `sentence_counts`
        self._sentences: list[Tensor] = []

    def update(
        self,
        pred_heads: Tensor,
        pred_rels: Tensor | None,
        gold_heads: Tensor,
        gold_rels: Tensor | None,
        lengths: Tensor,
        *,
        rel_universal: Tensor | None = None,
    ) -> None:
        """Add one batch.

        pred_heads, gold_heads: ``[B, dep]`` long, ``N+1`` positions; gold ``-1`` = unannotated.
        pred_rels, gold_rels:   ``[B, dep]`` relation ids, or ``None`` (gold needed for labels and
                                `by_relation`; a gold relation of ``-1`` is allowed only where the
                                gold head is ``-1``).
        lengths:                ``[B]`` words per sentence, ROOT not counted.
        rel_universal:          ``[L]`` long, relation id -> universal relation id, so LAS ignores
                                subtypes (see `universal_relations`); ``None`` compares ids as given.
        """
        if self._labeled is not None and self._labeled != (pred_rels is not None):
            raise ValueError("pred_rels: given in some updates and None in others")
        mask = self._check_shapes(pred_heads, pred_rels, gold_heads, gold_rels, lengths)
        annotated = mask & (gold_heads >= 0)
        self._check_heads(pred_heads, gold_heads, lengths, mask)
        head_ok = annotated & (pred_heads == gold_heads)
        labeled_ok = torch.zeros_like(head_ok)

        gold_u = pred_u = None
        if gold_rels is not None:
            gold_u = self._universal("gold_rels", gold_rels, annotated, rel_universal)
        if pred_rels is not None:
            if gold_u is None:
                raise ValueError("gold_rels: None while pred_rels is given; labels cannot be scored")
            pred_u = self._universal("pred_rels", pred_rels, annotated, rel_universal)
            label_ok = annotated & (pred_u == gold_u)
            labeled_ok = head_ok & label_ok
            self._label += int(label_ok.sum())
            self._labeled_correct += int(labeled_ok.sum())
        self._labeled = pred_rels is not None
        self._words += int(annotated.sum())
        self._head += int(head_ok.sum())

        self._add_lengths(lengths, annotated, head_ok, labeled_ok)
        if gold_u is not None:
            self._add_relations(gold_u, pred_u, annotated, head_ok, labeled_ok)

    def compute(self) -> dict[str, float | int | None]:
        """``uas``, ``las``, ``label_acc`` (relation right, head right or not) as percentages 0..100,
        and ``n_words`` (annotated words counted)."""
        labeled = bool(self._labeled)
        return {
            "uas": _percent(self._head, self._words),
            "las": _percent(self._labeled_correct, self._words) if labeled else None,
            "label_acc": _percent(self._label, self._words) if labeled else None,
            "n_words": self._words,
        }

    def sentence_counts(self) -> Tensor:
        """``[S, 3]`` long, one row per sentence in the order of the updates: annotated words,
        heads correct, heads and universal relations correct (0 without labels). The column sums
        are the counts `compute` divides, so scores of any subset of sentences follow the same
        conventions (significance tests resample these rows)."""
        if not self._sentences:
            return torch.zeros(0, 3, dtype=torch.long)
        return torch.cat(self._sentences)

    def by_length(self) -> dict[str, dict[str, float | int | None]]:
        """Scores per sentence-length bucket (``"1-10"`` ... ``"41+"``), each with ``uas``, ``las``
        (percentages), ``n_sentences`` and ``n_words``."""
        table: dict[str, dict[str, float | int | None]] = {}
        for (low, high), (sentences, words, head, labeled) in zip(
            LENGTH_BUCKETS, self._lengths.tolist()
        ):
            key = f"{low}-{high}" if high is not None else f"{low}+"
            table[key] = {
                "uas": _percent(head, words),
                "las": _percent(labeled, words) if self._labeled else None,
                "n_sentences": sentences,
                "n_words": words,
            }
        return table

    def by_relation(self, names: Sequence[str] | None = None) -> dict[str, dict[str, float | int | None]]:
        """Scores per universal relation that occurs in gold or prediction, keyed by
        ``names[universal id]`` (or the id as text): ``count`` (gold words), ``uas`` (head accuracy
        of those words), and with labels ``las`` (= recall of head+label), ``precision``,
        ``recall``, ``f1``, all percentages."""
        table: dict[str, dict[str, float | int | None]] = {}
        for u, (gold, pred, head, labeled) in enumerate(self._relations.tolist()):
            if gold == 0 and pred == 0:
                continue
            if names is not None and u >= len(names):
                raise ValueError(f"names: has {len(names)} entries, universal relation id {u} seen")
            row: dict[str, float | int | None] = {"count": gold, "uas": _percent(head, gold)}
            if self._labeled:
                precision, recall = _percent(labeled, pred), _percent(labeled, gold)
                row.update(las=recall, precision=precision, recall=recall,
                           f1=_percent(2 * labeled, gold + pred))
            table[names[u] if names is not None else str(u)] = row
        return table

    # -- checks and accumulation --------------------------------------------------------------

    @staticmethod
    def _check_shapes(pred_heads, pred_rels, gold_heads, gold_rels, lengths) -> Tensor:
        if gold_heads.dim() != 2:
            raise ValueError(f"gold_heads: expected [B, N+1], got shape {tuple(gold_heads.shape)}")
        shape = gold_heads.shape
        for name, tensor in (("pred_heads", pred_heads), ("pred_rels", pred_rels), ("gold_rels", gold_rels)):
            if tensor is not None and tensor.shape != shape:
                raise ValueError(f"{name}: shape {tuple(tensor.shape)} differs from gold_heads {tuple(shape)}")
        if lengths.dim() != 1 or lengths.shape[0] != shape[0]:
            raise ValueError(f"lengths: expected [{shape[0]}], got shape {tuple(lengths.shape)}")
        if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > shape[1] - 1):
            raise ValueError(f"lengths: values must lie in 0..{shape[1] - 1}, got {lengths.tolist()}")
        positions = torch.arange(shape[1], device=lengths.device)
        return (positions > 0) & (positions <= lengths[:, None])

    @staticmethod
    def _check_heads(pred_heads: Tensor, gold_heads: Tensor, lengths: Tensor, mask: Tensor) -> None:
        limit = lengths[:, None]
        bad = mask & ((gold_heads < -1) | (gold_heads > limit))
        if bad.any():
            raise _first_bad("gold_heads", bad, gold_heads, "-1..sentence length")
        bad = mask & (gold_heads >= 0) & ((pred_heads < 0) | (pred_heads > limit))
        if bad.any():
            raise _first_bad("pred_heads", bad, pred_heads, "0..sentence length")

    @staticmethod
    def _universal(name: str, rels: Tensor, annotated: Tensor, rel_universal: Tensor | None) -> Tensor:
        n_rels = rel_universal.shape[0] if rel_universal is not None else None
        bad = annotated & ((rels < 0) | (rels >= n_rels if n_rels is not None else False))
        if bad.any():
            allowed = f"0..{n_rels - 1}" if n_rels is not None else "0.."
            raise _first_bad(name, bad, rels, allowed)
        safe = torch.where(annotated, rels, torch.zeros_like(rels))
        if rel_universal is None:
            return safe
        if rel_universal.dim() != 1 or rel_universal.dtype != torch.long or (rel_universal < 0).any():
            raise ValueError("rel_universal: expected a 1-D LongTensor of non-negative ids")
        return rel_universal.to(rels.device)[safe]

    def _add_lengths(self, lengths: Tensor, annotated: Tensor, head_ok: Tensor, labeled_ok: Tensor) -> None:
        boundaries = torch.tensor([high for _, high in LENGTH_BUCKETS[:-1]], device=lengths.device)
        bucket = torch.bucketize(lengths, boundaries)
        counts = torch.stack(
            [(lengths > 0).long(), annotated.sum(1), head_ok.sum(1), labeled_ok.sum(1)], dim=1
        )
        self._lengths = self._lengths.index_add(0, bucket.cpu(), counts.cpu())
        self._sentences.append(counts[:, 1:].cpu())

    def _add_relations(
        self, gold_u: Tensor, pred_u: Tensor | None, annotated: Tensor, head_ok: Tensor, labeled_ok: Tensor
    ) -> None:
        gold = gold_u[annotated]
        size = int(gold.max()) + 1 if gold.numel() else 0
        pred = pred_u[annotated] if pred_u is not None else None
        if pred is not None and pred.numel():
            size = max(size, int(pred.max()) + 1)
        size = max(size, self._relations.shape[0])
        counts = torch.zeros(size, 4, dtype=torch.long)
        counts[:, _GOLD] = torch.bincount(gold, minlength=size).cpu()
        counts[:, _HEAD] = torch.bincount(gold_u[head_ok], minlength=size).cpu()
        if pred is not None:
            counts[:, _PRED] = torch.bincount(pred, minlength=size).cpu()
            counts[:, _LABELED] = torch.bincount(gold_u[labeled_ok], minlength=size).cpu()
        grown = torch.zeros(size, 4, dtype=torch.long)
        grown[: self._relations.shape[0]] = self._relations
        self._relations = grown + counts
