"""Exact tree sampling at any score scale: sequential conditioning on TreeCRF marginals.

The fallback of :mod:`parser.structs.tree.sampling` for the samples whose float64 Laplacian solves are
not provably accurate (score gaps of tens of nats or more). The state of a sample is the set of
arcs still ``allowed``; a word whose row allows one head is drawn. Each round computes the
marginals of the scores restricted to ``allowed`` (:class:`.partition.ArcPartition`, the TreeCRF's
route): the conditionals given the heads drawn so far, exact at any scale (LU where trusted,
log-space elimination elsewhere), and per sample:

- fixes every undrawn word whose most likely head leaves less than ``EPS64 / (N+1)`` to all
  others (so all the fixes of a sample together move at most ``2**-53`` of probability, below what
  a float64 uniform draw resolves), then
- draws the first remaining undrawn word from its conditional marginals.

The order is chosen from what was drawn before, which keeps the chain rule exact. An arc whose
true conditional probability is 0 can carry a rounding-sized marginal; if a round leaves a sample
with no tree, the round is undone for that sample and redrawn without the shortcut (rejecting
impossible draws is exactly conditioning on the possible ones). A sample handed over in a state
with no tree (an impossible arc drawn by the fast path, probability within its rounding) restarts
from ``base``.

Cost per round: one partition over the unfinished samples; the number of rounds is about the number
of genuinely uncertain words, small at large scales where nearly every word is fixed at once.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.tree.partition import ArcPartition

__all__ = ["conditionals", "draw_index", "sample_by_marginals"]

EPS64 = torch.finfo(torch.float64).eps
NEG_INF = float("-inf")


def draw_index(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """One index per row of the unnormalised, non-negative ``probs [M, K]`` (inverse CDF)."""
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator, device=probs.device, dtype=probs.dtype)
    choice = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(1)
    # u * total can round up to total; never return a zero-probability tail index.
    last = probs.shape[1] - 1 - (probs > 0).flip(-1).to(torch.int8).argmax(dim=-1)
    return torch.minimum(choice, last)


def sample_by_marginals(
    scores: Tensor,
    lengths: Tensor,
    allowed: Tensor,
    base: Tensor,
    *,
    single_root: bool,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Finish one tree per row from a partial state.

    scores:  ``[R, dep, head]`` float64, ``-inf`` off arcs; lengths ``[R]`` (>= 1).
    allowed: ``[R, dep, head]`` bool, arcs still possible (a drawn word allows only its head; a
             drawn root child is the only allowed root arc); must lie inside ``base``.
    base:    ``[R, dep, head]`` bool, the arcs allowed before anything was drawn.

    Returns heads ``[R, N+1]`` long (0 at ROOT and on padding).
    """
    rows_total, size = scores.shape[0], scores.shape[1]
    device = scores.device
    index = torch.arange(size, device=device)
    real = (index >= 1) & (index <= lengths[:, None])  # [R, dep]
    allowed = allowed & real[:, :, None]
    previous = allowed.clone()
    changed = torch.ones(rows_total, dtype=torch.bool, device=device)
    fresh = torch.ones(rows_total, dtype=torch.bool, device=device)  # nothing drawn here yet
    shortcut = torch.ones(rows_total, dtype=torch.bool, device=device)
    sure_mass = EPS64 / size
    for _ in range(4 * size + 16):  # each round fixes a word, or undoes a ~rounding-probability one
        undecided = real & (allowed.sum(-1) > 1)
        rows = (undecided.any(1) | changed).nonzero().squeeze(1)
        if rows.numel() == 0:
            break
        dead, marginals = conditionals(
            scores[rows], lengths[rows], allowed[rows], single_root=single_root
        )
        if bool(dead.any()):
            dead_rows = rows[dead]
            restart = fresh[dead_rows]
            allowed[dead_rows] = torch.where(
                restart[:, None, None],
                base[dead_rows] & real[dead_rows, :, None],
                previous[dead_rows],
            )
            shortcut[dead_rows] = restart  # redraw the undone round one word at a time
            changed[dead_rows] = True
            fresh[dead_rows] = restart
        alive = ~dead
        rows, marginals = rows[alive], marginals[alive]
        changed[rows] = False
        fresh[rows] = False
        state = allowed[rows]
        open_words = undecided[rows]
        marginals = marginals.masked_fill(~state, 0.0).clamp(min=0.0)
        best = marginals.argmax(-1)  # [r, dep]
        best_hot = index[None, None, :] == best[:, :, None]
        others = marginals.masked_fill(best_hot, 0.0).sum(-1)
        sure = open_words & (others <= sure_mass) & shortcut[rows, None]
        fixed = torch.where(sure[:, :, None], best_hot, state)
        # The first word still uncertain is drawn from its conditional.
        uncertain = open_words & ~sure
        drawing = uncertain.any(1)
        word = torch.where(uncertain, index, size).amin(1).clamp(max=size - 1)
        picked = torch.arange(len(rows), device=device)
        probs = marginals[picked, word]
        probs = torch.where(drawing[:, None], probs, (index == 0).to(probs.dtype)[None])
        head = draw_index(probs, generator)
        drawn_hot = index[None, :] == head[:, None]
        fixed[picked, word] = torch.where(drawing[:, None], drawn_hot, fixed[picked, word])
        previous[rows] = state
        allowed[rows] = fixed
        changed[rows] = (fixed != state).flatten(1).any(1)
        shortcut[rows] = True
    else:
        raise RuntimeError("sample_by_marginals: no progress; conditionals are inconsistent")
    heads = allowed.to(torch.int8).argmax(-1)
    return torch.where(real, heads, torch.zeros_like(heads))


def conditionals(
    scores: Tensor, lengths: Tensor, allowed: Tensor, *, single_root: bool
) -> tuple[Tensor, Tensor]:
    """Arc marginals ``[R, dep, head]`` float64 of the trees inside ``allowed`` (exact at any
    scale), and ``dead [R]``: True where no such tree exists (marginals then meaningless).

    Words with one allowed head are contracted into it first (a forced arc merges the dependent
    into its head: the merged node's outgoing weight to ``x`` is the log-sum-exp of both), so the
    TreeCRF only sees ROOT and the undrawn words. Once ROOT's only child is drawn, the rest hangs
    from ROOT's group by any number of arcs: a multi-root problem without direct ROOT arcs.
    """
    size = scores.shape[1]
    device = scores.device
    index = torch.arange(size, device=device)
    real = (index >= 1) & (index <= lengths[:, None])
    allowed = allowed & real[:, :, None]
    s = scores.masked_fill(~allowed, NEG_INF)
    fixed = real & (allowed.sum(-1) == 1)
    head_of = allowed.to(torch.int8).argmax(-1)
    top = torch.where(fixed, head_of, index)
    for _ in range(max(1, (size - 1).bit_length())):
        top = top.gather(1, top)
    root_children = (fixed & (head_of == 0)).sum(1)
    dead = (real & fixed.gather(1, top)).any(1)  # a drawn cycle never reaches a free node
    root_taken = root_children >= 1 if single_root else torch.zeros_like(dead)
    if single_root:
        dead |= root_children > 1
    undrawn = real & ~fixed
    slot = torch.where(undrawn, undrawn.cumsum(1), 0)  # reduced index: ROOT 0, undrawn 1..K
    head_slot = slot.gather(1, torch.where(dead[:, None], 0, top))  # [R, head]
    count = undrawn.sum(1)
    width = int(count.max()) + 1 if count.numel() else 1
    valid = undrawn[:, :, None] & (slot[:, :, None] != head_slot[:, None, :])
    valid &= ~(root_taken[:, None, None] & (index == 0)[None, None, :])
    s = s.masked_fill(~valid, NEG_INF)
    group = head_slot[:, None, :].expand(-1, size, -1)  # [R, dep, head] -> reduced head
    high = torch.full((s.shape[0], size, width), NEG_INF, dtype=s.dtype, device=device)
    high = high.scatter_reduce(2, group, s, "amax")
    shift = high.gather(2, group)
    terms = torch.where(torch.isfinite(s), torch.exp(s - shift.nan_to_num(neginf=0.0)), 0.0)
    total = torch.zeros_like(high).scatter_add(2, group, terms)
    reduced = torch.where(total > 0, torch.log(total) + high.nan_to_num(neginf=0.0), NEG_INF)
    # Rows of the undrawn words, placed at their reduced index (others go to a spare row).
    target = torch.where(undrawn, slot, width)[:, :, None].expand(-1, -1, width)
    small = torch.full((s.shape[0], width + 1, width), NEG_INF, dtype=s.dtype, device=device)
    small = small.scatter(1, target, reduced)[:, :width]
    reduced_mu = torch.zeros_like(small)
    open_rows = ~dead & (count > 0)
    multi_root = root_taken | (not single_root)
    for multi in (False, True):
        part = open_rows & (multi_root == multi)
        if not bool(part.any()):
            continue
        crf = ArcPartition(small[part], count[part], single_root=single_root and not multi)
        dead[part] |= ~torch.isfinite(crf.log_partition)
        reduced_mu[part] = crf.arc_marginals.to(torch.float64)
    # Back to the original heads: each reduced arc splits in proportion to its members' weights.
    rows = reduced_mu.gather(1, slot[:, :, None].expand(-1, -1, width))  # [R, dep, reduced head]
    share = torch.where(torch.isfinite(s), torch.exp(s - reduced.gather(2, group)), 0.0)
    marginals = rows.gather(2, group) * share
    return dead, torch.where(fixed[:, :, None], allowed.to(marginals.dtype), marginals)
