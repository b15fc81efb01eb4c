"""Maximum spanning arborescence decoding (Chu-Liu/Edmonds with the root constraint).

Multi-root trees: Chu-Liu/Edmonds (Chu & Liu 1965; Edmonds 1967), batched over sentences and
contracting every cycle of the greedy graph at once. Nothing is ever re-indexed: the graph stays
in the original node space, a component label per node (its smallest node) says which contracted
node it belongs to, and arcs inside a component are masked. One round = pick each component's best
entering arc, find the cycles of that graph by pointer doubling, merge each cycle into one
component and lower the arcs entering a cycle member by the value of the member's chosen arc.
Expansion walks the rounds backwards: a node keeps the arc that enters its component from above
unless that arc ends in another sub-component, in which case the sub-component's own arc is used.

A sentence whose per-word best heads already form a tree (with one root child, for single-root
trees) has it as its answer, and only the others are decoded.

Single-root trees: the best tree of all when it has one root child; otherwise the reweighting of
Stanojevic & Cohen (EMNLP 2021, "A root of a problem"): subtracting from every root arc a
constant larger than the spread of tree scores makes the unconstrained optimum the best
single-root tree; exact, and one more decoding pass for those sentences only.

Ties are broken deterministically (lowest head index, then lowest dependent index), so a sentence
decodes the same alone or in any padded batch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.common import check_scores_and_lengths, word_mask
from parser.structs.decoding.native import native_mst

__all__ = ["NoTreeError", "maximum_spanning_tree"]

NEG_INF = float("-inf")


class NoTreeError(ValueError):
    """No spanning tree (with the requested root constraint) has a finite score."""


def maximum_spanning_tree(scores: Tensor, lengths: Tensor, *, single_root: bool,
                          native: bool = True) -> Tensor:
    """Highest-scoring dependency tree of each sentence.

    scores:  ``[B, dep, head]`` = ``[B, N+1, N+1]``, index 0 is ROOT; ``-inf`` forbids an arc.
    lengths: ``[B]`` number of words per sentence.
    single_root: exactly one word attaches to ROOT when True.
    native: CPU scores go to the compiled decoder where it is available
    (:mod:`parser.structs.decoding.native`, the same trees); False: this module's torch decoder.

    Returns heads ``[B, N+1]`` long on the scores' device; ``heads[:, 0]`` and padding are 0.
    Raises ``NoTreeError`` (a ``ValueError``) when a sentence has no tree of finite score.
    """
    scores, _, _ = check_scores_and_lengths(scores, lengths)
    batch, size = scores.shape[0], scores.shape[1]
    if batch == 0 or size == 1:
        return torch.zeros(batch, size, dtype=torch.long, device=scores.device)
    with torch.no_grad():
        lengths = lengths.to(scores.device)
        real = word_mask(lengths, size)
        found = native_mst(scores, lengths, single_root=single_root) if native else None
        if found is not None:
            return _checked(found, scores, lengths, real, single_root=single_root)
        w = _unit_scale(_arc_weights(scores, lengths, real))
        heads, done = _greedy_trees(w, real, single_root=single_root)
        # Only the sentences whose per-word best heads are no tree go through Chu-Liu/Edmonds
        # (on them its first round would find these heads and stop): its rounds run on the
        # whole batch while any sentence has a cycle, and a trained model's greedy heads
        # mostly form a tree already.
        rest = (~done).nonzero().squeeze(1)
        if rest.numel():
            found = _chu_liu_edmonds(w[rest])
            heads = heads.index_copy(0, rest, found)
            if single_root:
                # The best tree of all is the best single-root one when it has one root child;
                # only the others are reweighted, whose greedy graph under the penalty is
                # cyclic throughout (about N contraction rounds, against a few here).
                several = ((found == 0) & real[rest]).sum(dim=1) > 1
                rest = rest[several]
            if single_root and rest.numel():
                left = _penalise_root_arcs(w[rest], lengths[rest], real[rest])
                heads = heads.index_copy(0, rest, _chu_liu_edmonds(left))
    return _checked(heads, scores, lengths, real, single_root=single_root)


def _checked(heads: Tensor, scores: Tensor, lengths: Tensor, real: Tensor, *,
             single_root: bool) -> Tensor:
    """``heads`` with padding 0, after checking each tree has a finite score (and one root child
    when ``single_root``): else :class:`NoTreeError` naming the sentence."""
    heads = torch.where(real, heads, torch.zeros_like(heads))
    picked = scores.detach().gather(2, heads[:, :, None]).squeeze(2)
    stuck = (real & torch.isneginf(picked)).any(dim=1)
    roots = ((heads == 0) & real).sum(dim=1)
    several = roots > 1 if single_root else torch.zeros_like(stuck)
    if bool((stuck | several).any()):
        b = int((stuck | several).nonzero()[0])
        kind = "single-root " if single_root else ""
        why = "every tree with finite score has several root children"
        if bool(stuck[b]):
            why = "every tree uses a forbidden (-inf) arc"
        raise NoTreeError(
            f"scores: no {kind}spanning tree with finite score exists for sentence {b} "
            f"(length {int(lengths[b])}): {why}"
        )
    return heads


def _arc_weights(scores: Tensor, lengths: Tensor, real: Tensor) -> Tensor:
    """Float64 ``[B, dep, head]``: real arcs keep their score, others are -inf.

    Padding words hang from ROOT by a 0 arc, so they are finished singletons from the start.
    """
    size = scores.shape[1]
    index = torch.arange(size, device=scores.device)
    head_ok = index[None, :] <= lengths[:, None]
    allowed = real[:, :, None] & head_ok[:, None, :] & (index[:, None] != index[None, :])
    w = scores.detach().to(torch.float64).masked_fill(~allowed, NEG_INF)
    padding = (index[None, :] >= 1) & ~real
    w[:, :, 0] = torch.where(padding, torch.zeros_like(w[:, :, 0]), w[:, :, 0])
    return w


def _unit_scale(w: Tensor) -> Tensor:
    """``w`` times a power of two per sentence bringing its largest finite ``|w|`` into [0.5, 1).

    Exact (a power of two changes no rounding, short of underflow far below the largest score's
    resolution) and changes no tree's rank, but keeps the single-root penalty ``n spread + 1``
    both finite (scores near float64's max) and resolvable (constant scores of 1e20: ``1e20 - 1``
    rounds to ``1e20``, a tie that CLE may break towards several root children).
    """
    finite = torch.isfinite(w)
    magnitude = torch.where(finite, w.abs(), torch.zeros_like(w)).flatten(1).amax(1)
    _, exponent = torch.frexp(magnitude)
    return torch.ldexp(w, -exponent[:, None, None].to(w.dtype))


def _greedy_trees(w: Tensor, real: Tensor, *, single_root: bool) -> tuple[Tensor, Tensor]:
    """Each word's best head (the lowest index among equals; 0 for ROOT and padding) ``[B, N+1]``,
    and ``[B]`` whether those heads already form a tree of finite score (with one root child when
    ``single_root``): then it is the maximum spanning tree, as Chu-Liu/Edmonds' first round finds."""
    value, greedy = w.max(dim=-1)
    greedy = torch.where(real, greedy, torch.zeros_like(greedy))
    greedy[:, 0] = 0
    done = _reaches_root(greedy) & (torch.isfinite(value) | ~real).all(dim=1)
    if single_root:
        done &= ((greedy == 0) & real).sum(dim=1) == 1
    return greedy, done


def _penalise_root_arcs(w: Tensor, lengths: Tensor, real: Tensor) -> Tensor:
    """Root arcs lowered by more than the spread of tree scores (the sentences whose greedy heads
    are no single-root tree: :func:`_greedy_trees`).

    Every tree has at least one root arc; with the penalty, the best tree is one with as few root
    arcs as possible (one, when a single-root tree exists) and the best such tree (Stanojevic &
    Cohen 2021).
    """
    finite = torch.isfinite(w)
    high = torch.where(finite, w, torch.full_like(w, NEG_INF)).flatten(1).amax(dim=1)
    low = torch.where(finite, w, torch.full_like(w, float("inf"))).flatten(1).amin(dim=1)
    spread = torch.where(high >= low, high - low, torch.zeros_like(high))
    penalty = lengths.to(w.dtype) * spread + 1.0
    w = w.clone()
    w[:, :, 0] -= torch.where(real, penalty[:, None], torch.zeros_like(w[:, :, 0]))
    return w


def _doubling_steps(size: int) -> int:
    """Pointer-doubling steps whose path length ``2**steps`` covers any path of ``size`` nodes."""
    return max(1, (size - 1).bit_length())


def _reaches_root(parent: Tensor) -> Tensor:
    """``[B]`` True where following ``parent [B, node]`` (``parent[:, 0] = 0``) ends at 0."""
    jump = parent.clone()
    jump[:, 0] = 0
    for _ in range(_doubling_steps(parent.shape[1])):
        jump = jump.gather(1, jump)
    return (jump == 0).all(dim=1)


def _best_entering(w: Tensor, offset: Tensor, component: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Each component's best entering arc, indexed by the component's label (its smallest node).

    ``w [B, dep, head]`` weights, ``offset [B, dep]`` what contraction took off each dependent's
    arcs, ``component [B, node]`` labels. Returns ``(dep, head, value)``, each ``[B, label]``;
    slots that label no component, ROOT's, and components with no finite entering arc get head 0
    (they never join a cycle).
    """
    size = w.shape[1]
    inside = component[:, :, None] == component[:, None, :]
    value, head = w.masked_fill(inside, NEG_INF).max(dim=-1)  # [B, dep]: first max = lowest head
    value = value - offset  # a per-row constant: it changes no row's argmax
    best = torch.full_like(value, NEG_INF).scatter_reduce(1, component, value, "amax")
    nodes = torch.arange(size, device=w.device).expand_as(component)
    candidate = torch.where(value == best.gather(1, component), nodes, size)
    dep = torch.full_like(component, size).scatter_reduce(1, component, candidate, "amin")
    dep = dep.clamp(max=size - 1)
    head = torch.where(torch.isneginf(best), torch.zeros_like(dep), head.gather(1, dep))
    return dep, head, best


def _cycles(component: Tensor, head: Tensor) -> tuple[Tensor, Tensor]:
    """Cycles of the component graph ``label -> component[head[label]]``.

    Returns ``(cyclic, smallest)`` ``[B, label]``: whether the label lies on a cycle, and the
    smallest label on the path of ``size`` steps from it (the cycle's smallest node, on a cycle).
    """
    size = component.shape[1]
    jump = component.gather(1, head)
    smallest = torch.arange(size, device=component.device).expand_as(component)
    for _ in range(_doubling_steps(size)):
        smallest = torch.minimum(smallest, smallest.gather(1, jump))
        jump = jump.gather(1, jump)
    # After at least `size` steps every path has reached its cycle, and every cycle node is hit.
    cyclic = torch.zeros_like(component, dtype=torch.bool).scatter_(1, jump, True)
    cyclic[:, 0] = False
    return cyclic, smallest


def _chu_liu_edmonds(w: Tensor) -> Tensor:
    """Maximum arborescences rooted at 0 of ``w [B, dep, head]`` (row 0, diagonal -inf) -> heads
    ``[B, N+1]``. Rows with no finite arc get an arbitrary head (the caller checks finiteness)."""
    batch, size = w.shape[0], w.shape[1]
    component = torch.arange(size, device=w.device).expand(batch, size).clone()
    offset = torch.zeros(batch, size, dtype=w.dtype, device=w.device)
    history = []
    while True:
        dep, head, value = _best_entering(w, offset, component)
        cyclic, smallest = _cycles(component, head)
        if not bool(cyclic.any()):
            break
        history.append((component, dep, head))
        in_cycle = cyclic.gather(1, component)  # [B, node]
        # Entering a cycle member's component replaces that component's chosen arc.
        offset = offset + torch.where(in_cycle, value.gather(1, component), torch.zeros_like(value))
        component = torch.where(in_cycle, smallest.gather(1, component), component)
    live_dep, live_head = dep.gather(1, component), head.gather(1, component)
    for labels, chosen_dep, chosen_head in reversed(history):
        own = labels.gather(1, live_dep) == labels
        live_dep = torch.where(own, live_dep, chosen_dep.gather(1, labels))
        live_head = torch.where(own, live_head, chosen_head.gather(1, labels))
    live_head[:, 0] = 0
    return live_head
