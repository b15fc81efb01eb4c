"""Best projective tree: Eisner's (1996) O(n^3) dynamic program, batched over sentences.

``eisner`` decodes; the same chart in the log semiring is the inside algorithm of
:class:`parser.structs.projective.crf.ProjectiveTreeCRF` (``chart``, ``chart_arcs`` and
``root_totals`` serve both). ``eisner`` is the alternative to the maximum spanning tree for a model whose scores spread mass over crossing arcs.
A model trained without trees (GE) puts 14% of its predicted arcs into crossings on EWT dev where
gold has 0.4%; restricting its best tree to projective ones is a structural prior that 99% of UD
arcs satisfy (experiments/results/ge_alone_clauses.md).

Chart over positions ``0..N`` (0 = ROOT), spans ``[i, j]`` with ``j = i + width``, one width at a
time, every span of that width and every sentence of the batch in one tensor operation:

- incomplete ``[i, j]``, ``RIGHT``: arc ``i -> j`` plus whatever lies between; ``LEFT``: ``j -> i``;
- complete ``[i, j]``, ``RIGHT``: ``i`` heads the whole span, ``j`` has no dependent beyond it;
  ``LEFT``: ``j`` heads it.

Single root: ROOT takes part in no span; the root word ``r`` heads ``[1, r]`` to its left and
``[r, n]`` to its right, and the best ``r`` is chosen last. Multiple roots: ROOT is position 0 of the
chart, a head like any other (never a dependent). Padding is never inside a sentence's spans, so a
sentence decodes the same alone or in a padded batch; ties go to the lowest split point.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.common import check_scores_and_lengths
from parser.structs.decoding.native import native_eisner

__all__ = ["chart", "chart_arcs", "eisner", "root_totals"]

LEFT, RIGHT = 0, 1
NEG_INF = float("-inf")


def eisner(scores: Tensor, lengths: Tensor, *, single_root: bool, native: bool = True) -> Tensor:
    """Heads ``[B, N+1]`` long (``heads[:, 0] = 0``, padding 0) of the best projective tree.

    scores: ``[B, N+1, N+1]`` arc scores ``scores[b, dep, head]`` (row 0, the diagonal and padding
    are ignored); lengths: ``[B]`` words per sentence. A sentence without a projective tree of
    finite score (-inf arcs) is an error naming it. ``native``: CPU scores go to the compiled
    twin where it is available (:mod:`parser.structs.decoding.native`, the same trees); False:
    this module's batched torch chart.
    """
    scores, _, _ = check_scores_and_lengths(scores, lengths)
    batch, size = scores.shape[0], scores.shape[1]
    lengths = lengths.to(device=scores.device, dtype=torch.long)
    if size == 1:  # no sentence has a word
        return torch.zeros(batch, size, dtype=torch.long, device=scores.device)
    found = native_eisner(scores, lengths, single_root=single_root) if native else None
    if found is not None:
        return found
    scores = scores.detach().to(torch.float64)
    complete, splits = chart(chart_arcs(scores, single_root=single_root), _max)
    if single_root:
        best, root = root_totals(complete, scores, lengths).max(-1)
        _check_finite(best.masked_fill(lengths == 0, 0.0))  # no word: the empty tree
        roots = root + 1
    else:
        _check_finite(complete[torch.arange(batch, device=scores.device), 0, lengths, RIGHT])  # [0, n]
        roots = None
    split_complete, split_incomplete = (table.cpu() for table in splits)
    heads = _backtrack(split_complete, split_incomplete, roots, lengths.cpu(), size, single_root)
    return heads.to(scores.device)


def chart_arcs(scores: Tensor, *, single_root: bool) -> Tensor:
    """``[B, head, dep]`` arc scores for the chart: ROOT is never a dependent, no self-loops, and
    when single-rooted ROOT's arcs stay out of the chart (:func:`root_totals` adds them)."""
    size = scores.shape[1]
    node = torch.arange(size, device=scores.device)
    allowed = (node[None, :] != 0) & (node[:, None] != node[None, :])  # [head, dep]
    if single_root:
        allowed = allowed & (node[:, None] != 0)
    return scores.transpose(1, 2).masked_fill(~allowed, NEG_INF)


def _max(values: Tensor) -> tuple[Tensor, Tensor]:
    return values.max(-1)


def chart(arc: Tensor, reduce) -> tuple[Tensor, tuple[Tensor, Tensor] | None]:
    """Eisner's chart over ``arc [B, head, dep]``, every span of a width at once.

    ``reduce(x [B, spans, splits]) -> (values [B, spans], best split or None)``: max (the best
    tree, with split points to backtrack) or log-sum-exp (the inside algorithm). Span values are
    kept in lists per width, each ``[B, start]``, so every step is out of place and autograd's
    backward does not copy the whole chart once per width.
    Returns ``complete [B, start, width, side]`` and, when ``reduce`` gives split points,
    ``(split_complete, split_incomplete)`` long ``[B, i, j, side]`` (spans by their two ends).
    """
    batch, size = arc.shape[0], arc.shape[1]
    device = arc.device
    none = arc.new_full((batch, size), NEG_INF)
    comp_left, comp_right = [torch.zeros_like(none)], [torch.zeros_like(none)]
    inc_left, inc_right = [none], [none]
    split_complete = split_incomplete = None
    for width in range(1, size):
        count = size - width
        starts = torch.arange(count, device=device)
        splits = torch.arange(width, device=device)
        left_done, right_done = torch.stack(comp_left, -1), torch.stack(comp_right, -1)  # [B, S, width]
        # Incomplete [i, j]: [i, i + k] headed by i and [i + k + 1, j] headed by j, then the arc.
        halves = right_done[:, :count, :] + left_done[:, starts[:, None] + splits + 1, (width - 1 - splits)[None, :]]
        between, where_inc = reduce(halves)  # [B, count]
        inc_right.append(_pad(between + arc[:, starts, starts + width], size))  # i -> j
        inc_left.append(_pad(between + arc[:, starts + width, starts], size))  # j -> i
        incomplete_left, incomplete_right = torch.stack(inc_left, -1), torch.stack(inc_right, -1)
        # Complete [i, j] headed by j: [i, i + k] complete + [i + k, j] incomplete, k in [0, width).
        left = left_done[:, :count, :] + incomplete_left[:, starts[:, None] + splits, (width - splits)[None, :]]
        best, where_left = reduce(left)
        comp_left.append(_pad(best, size))
        # Complete [i, j] headed by i: [i, i + k] incomplete + [i + k, j] complete, k in (0, width].
        reach = splits + 1
        right = (incomplete_right[:, starts[:, None], reach[None, :]]
                 + right_done[:, starts[:, None] + reach, (width - reach)[None, :]])
        best, where_right = reduce(right)
        comp_right.append(_pad(best, size))
        if where_inc is not None:
            if split_complete is None:
                split_complete = torch.zeros(batch, size, size, 2, dtype=torch.long, device=device)
                split_incomplete = torch.zeros_like(split_complete)
            ends = starts + width
            split_incomplete[:, starts, ends, RIGHT] = starts + where_inc
            split_incomplete[:, starts, ends, LEFT] = starts + where_inc
            split_complete[:, starts, ends, LEFT] = starts + where_left
            split_complete[:, starts, ends, RIGHT] = starts + 1 + where_right
    complete = torch.stack([torch.stack(comp_left, -1), torch.stack(comp_right, -1)], -1)
    return complete, None if split_complete is None else (split_complete, split_incomplete)


def _pad(values: Tensor, size: int) -> Tensor:
    """``[B, count]`` -> ``[B, size]`` with -inf at the starts a span of this width cannot have."""
    return torch.cat([values, values.new_full((values.shape[0], size - values.shape[1]), NEG_INF)], 1)


def root_totals(complete: Tensor, scores: Tensor, lengths: Tensor) -> Tensor:
    """Single root: ``[B, N]`` the chart's total for each root word ``r`` (``[1, r]`` headed by
    ``r`` on its left, ``[r, n]`` on its right, plus ``scores[b, r, 0]``); -inf past the sentence.
    ``complete`` is indexed ``[B, start, width, side]``."""
    batch, size = scores.shape[0], scores.shape[1]
    words = torch.arange(1, size, device=scores.device)
    rows = torch.arange(batch, device=scores.device)[:, None]
    heads_left = complete[:, 1, words - 1, LEFT]  # r heads [1, r] (width r - 1; 0 for r = 1)
    right_width = (lengths[:, None] - words[None, :]).clamp(min=0)
    heads_right = complete[rows, words[None, :], right_width, RIGHT]  # r heads [r, n]
    total = heads_left + heads_right + scores[:, 1:, 0]
    return total.masked_fill(words[None, :] > lengths[:, None], NEG_INF)


def _check_finite(total: Tensor) -> None:
    bad = ~torch.isfinite(total)
    if bad.any():
        raise ValueError(
            f"eisner: no projective tree with a finite score for sentences {bad.nonzero().flatten().tolist()}"
        )


def _backtrack(split_complete: Tensor, split_incomplete: Tensor, roots: Tensor | None,
               lengths: Tensor, size: int, single_root: bool) -> Tensor:
    complete, incomplete = split_complete.numpy(), split_incomplete.numpy()
    heads = torch.zeros(len(lengths), size, dtype=torch.long)
    out = heads.numpy()
    for b, n in enumerate(lengths.tolist()):
        if n == 0:
            continue
        if single_root:
            root = int(roots[b])
            out[b, root] = 0
            stack = [(1, root, LEFT, True), (root, n, RIGHT, True)] if root > 1 else [(root, n, RIGHT, True)]
        else:
            stack = [(0, n, RIGHT, True)]
        while stack:
            i, j, side, is_complete = stack.pop()
            if i == j:
                continue
            if is_complete:
                r = int(complete[b, i, j, side])
                if side == LEFT:
                    stack += [(i, r, LEFT, True), (r, j, LEFT, False)]
                else:
                    stack += [(i, r, RIGHT, False), (r, j, RIGHT, True)]
            else:
                r = int(incomplete[b, i, j, side])
                if side == LEFT:
                    out[b, i] = j
                else:
                    out[b, j] = i
                stack += [(i, r, RIGHT, True), (r + 1, j, LEFT, True)]
    return heads
