"""Exact sampling of dependency trees from p(t) ∝ exp(sum of arc scores), at any score scale.

Fast path: sequential conditioning on marginals, batched over samples and sentences (no Python
loop over either): words are visited in order 1..N; word ``d``'s head is drawn from its marginal
given the heads already drawn, then fixed. Fixing ``head(d) = h`` replaces row ``d`` of the
Laplacian by ``e_d - e_h`` (``e_d`` for ROOT), which keeps the matrix-tree theorem valid for the
conditioned distribution, so the next conditional marginal is again one linear solve:

    x = A^{-1} e_d,   p(d -> h) = w[d, h] (x_d - x_h),   p(d -> ROOT) = r_d x_d

(multi-root Laplacian ``A[d,d] = r_d + sum_h w[d,h]``, ``A[d,h] = -w[d,h]``, rows = dependents).
Single-root trees first draw the root's only child ``c`` from the root marginals of Koo et al.'s
(2007) matrix, then keep only the root arc of ``c``: multi-root trees of that graph are exactly the
single-root trees with root child ``c``. Arcs that would close a cycle with heads already drawn are
excluded explicitly (their exact probability is 0). ``A^{-1}`` is kept by Sherman-Morrison updates
and refreshed every ``REFRESH`` words. Cost: O(N^3) per sample.

Exactness check, per sample and per step, before each draw: the solution ``x`` used is checked a
posteriori, ``|x - x*| <= |A^{-1}| (|A x - e_d| + eps N |A| |x|)``, and with the rounding of
``x_d - x_h`` this bounds every conditional probability's error; above ``TOLERANCE`` (large score
gaps make the Laplacian ill-conditioned) the sample leaves the fast path with the heads drawn so
far and is finished by :func:`parser.structs.tree.sampling_robust.sample_by_marginals`, whose
conditionals come from the TreeCRF's exact log-space path. Switching how the conditionals are
computed mid-sample keeps the chain rule, so every sample is exact.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.common import check_scores_and_lengths
from parser.structs.tree.sampling_robust import EPS64, draw_index, sample_by_marginals

__all__ = ["sample_trees"]


def sample_trees(
    scores: Tensor,
    lengths: Tensor,
    *,
    single_root: bool,
    n: int,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw ``n`` independent trees per sentence.

    scores:  ``[B, dep, head]`` = ``[B, N+1, N+1]``, index 0 is ROOT; ``-inf`` forbids an arc.
    lengths: ``[B]`` number of words per sentence.
    generator: a ``torch.Generator`` on the scores' device, for reproducible samples.

    Returns heads ``[n, B, N+1]`` long; ``heads[..., 0]`` and padding are 0.
    Raises ``ValueError`` when a sentence has no tree of finite score.
    """
    scores, _, _ = check_scores_and_lengths(scores, lengths)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive int number of samples, got {n!r}")
    batch, size = scores.shape[0], scores.shape[1]
    device = scores.device
    if size == 1 or batch == 0:
        return torch.zeros(n, batch, size, dtype=torch.long, device=device)
    with torch.no_grad():
        masked, w = _shifted_weights(scores, lengths, single_root=single_root)
        lengths = lengths.to(device)
        effective = lengths.clamp(min=1).repeat(n)
        w = w.repeat(n, 1, 1)  # [n*B, dep, head], sample-major
        live = torch.ones(w.shape[0], dtype=torch.bool, device=device)
        if single_root:
            child, live = _draw_root_child(w, effective, generator)
            keep = torch.zeros_like(w[:, :, 0]).scatter_(1, child[:, None], 1.0)
            w[:, :, 0] = w[:, :, 0] * keep
        heads, stop = _sequential_conditioning(w, effective, live, generator)
        left = (stop <= effective) & (lengths.repeat(n) > 0)
        if bool(left.any()):
            rows = left.nonzero().squeeze(1)
            sentences = rows % batch
            base = torch.isfinite(masked[sentences])
            root_child = child[rows] if single_root else None
            allowed = _partial_state(base, heads[rows], stop[rows], live[rows], root_child)
            heads[rows] = sample_by_marginals(
                masked[sentences],
                lengths[sentences],
                allowed,
                base,
                single_root=single_root,
                generator=generator,
            )
    real = torch.arange(size, device=device)[None, :] <= lengths.repeat(n)[:, None]
    return (heads * real).view(n, batch, size)


def _shifted_weights(
    scores: Tensor, lengths: Tensor, *, single_root: bool
) -> tuple[Tensor, Tensor]:
    """Masked float64 scores (``-inf`` off arcs) and ``exp(scores - rowmax)``, both
    ``[B, dep, head]`` (weights 0 on forbidden arcs and padding).

    Empty sentences get a dummy word 1 attached to ROOT so every matrix stays invertible.
    """
    size = scores.shape[1]
    device = scores.device
    s = scores.detach().to(torch.float64)
    index = torch.arange(size, device=device)
    lengths = lengths.to(device)
    dep_real = (index[None, :] >= 1) & (index[None, :] <= lengths[:, None])  # [B, dep]
    head_real = index[None, :] <= lengths[:, None]  # [B, head]
    allowed = dep_real[:, :, None] & head_real[:, None, :] & (index[:, None] != index[None, :])
    s = s.masked_fill(~allowed, float("-inf"))
    stuck = dep_real & torch.isneginf(s).all(dim=-1)
    if bool(stuck.any()):
        b, dep = (int(i) for i in stuck.nonzero()[0])
        raise ValueError(
            f"scores: word {dep} of sentence {b} has no allowed head (all its scores are -inf), "
            "so no tree exists"
        )
    _check_tree_exists(torch.isfinite(s), dep_real, single_root=single_root)
    shift = s.max(dim=-1, keepdim=True).values
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    w = torch.exp(s - shift)
    w[:, 1, 0] = torch.where(lengths == 0, torch.ones_like(w[:, 1, 0]), w[:, 1, 0])
    return s, w


def _check_tree_exists(allowed: Tensor, dep_real: Tensor, *, single_root: bool) -> None:
    """Raise unless every sentence has a tree over its allowed arcs ``allowed [B, dep, head]``.

    Checked on the graph, not the numbers: a singular Laplacian would otherwise give garbage.
    Multi-root: every word reaches ROOT. Single-root: some word with an allowed root arc is
    reached from every word through word arcs (then it is the root's only child).
    """
    words = allowed[:, 1:, 1:].to(torch.float32)
    reach = torch.eye(words.shape[1], device=words.device).expand_as(words) + words
    reach = (reach > 0).to(torch.float32)
    while True:  # transitive closure by squaring, usually done in one or two products
        closed = (reach @ reach > 0).to(torch.float32)
        if torch.equal(closed, reach):
            break
        reach = closed
    real = dep_real[:, 1:]
    root = allowed[:, 1:, 0]
    if single_root:
        reached_by_all = ((reach > 0) | ~real[:, :, None]).all(dim=1)  # [B, candidate]
        ok = (reached_by_all & root & real).any(dim=1) | ~real.any(dim=1)
    else:
        to_root = ((reach > 0) & root[:, None, :]).any(dim=2)  # [B, dep]
        ok = (to_root | ~real).all(dim=1)
    if not bool(ok.all()):
        b = int((~ok).nonzero()[0])
        kind = "single-root " if single_root else ""
        raise ValueError(f"scores: sentence {b} has no {kind}tree over its allowed (finite) arcs")


def _partial_state(
    base: Tensor, heads: Tensor, stop: Tensor, live: Tensor, root_child: Tensor | None
) -> Tensor:
    """Arcs ``[R, dep, head]`` still possible for samples that left the fast path: words before
    ``stop`` keep their drawn head; a root child drawn on the fast path (``live``) is the only
    allowed root arc."""
    size = base.shape[1]
    index = torch.arange(size, device=base.device)
    drawn = ((index[None, :] >= 1) & (index[None, :] < stop[:, None]))[:, :, None]
    chosen = index[None, None, :] == heads[:, :, None]
    allowed = torch.where(drawn, chosen, base)
    if root_child is not None:
        only = (index[None, :] == root_child[:, None]) | ~live[:, None]
        allowed[:, :, 0] &= only
    return allowed & base


def _padding_identity(effective: Tensor, words: int) -> Tensor:
    """``[M, words, words]`` diagonal with 1 on the rows of padding words."""
    pad = torch.arange(1, words + 1, device=effective.device)[None, :] > effective[:, None]
    return torch.diag_embed(pad.to(torch.float64))


def _checked_inverse(matrix: Tensor) -> tuple[Tensor, Tensor]:
    """``(inverse, ok)``: ``ok [M]`` False where the matrix is numerically singular; those
    inverses are replaced by the identity so they stay finite."""
    inverse, info = torch.linalg.inv_ex(matrix)
    ok = (info == 0) & torch.isfinite(inverse).flatten(1).all(1)
    eye = torch.eye(matrix.shape[-1], dtype=matrix.dtype, device=matrix.device)
    return torch.where(ok[:, None, None], inverse, eye), ok


def _probability_error(matrix: Tensor, inverse: Tensor, x: Tensor, k: int) -> Tensor:
    """``[M]`` bound on the error of the probabilities ``w (x_d - x_h)`` / ``r x_d`` (``w, r <= 1``)
    computed from ``x ~ matrix^{-1} e_k``, componentwise from the residual:
    ``|x - x*| <= |A^{-1}| (|A x - e_k| + eps (N + 2) |A| |x|)`` (the second term covers the
    residual's own rounding), plus the rounding of ``x_d - x_h``."""
    residual = (matrix @ x[:, :, None]).squeeze(-1)
    residual[:, k] -= 1.0
    size = matrix.shape[-1]
    slack = residual.abs() + EPS64 * (size + 2) * (matrix.abs() @ x.abs()[:, :, None]).squeeze(-1)
    solution = (inverse.abs() @ slack[:, :, None]).squeeze(-1)
    return 2.0 * solution.amax(-1) + 4.0 * EPS64 * x.abs().amax(-1)


def _draw_root_child(
    w: Tensor, effective: Tensor, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """Root child ``[M]`` (word index) drawn from the single-root marginals of ROOT's arcs, and
    ``live [M]``: False where those marginals are not provably accurate (child then meaningless).

    Koo's matrix: rows = dependents, column 0 holds the root weights ``r``; ``p(d -> ROOT) =
    r_d (K^{-1})[0, d-1]``, i.e. ``r`` times the solution of ``K^T y = e_0``.
    """
    words = w.shape[1] - 1
    arcs = w[:, 1:, 1:]
    koo = torch.diag_embed(arcs.sum(dim=-1)) - arcs + _padding_identity(effective, words)
    koo[:, :, 0] = w[:, 1:, 0]
    matrix = koo.transpose(-1, -2)
    inverse, ok = _checked_inverse(matrix)
    y = inverse[:, :, 0]
    probs = (w[:, 1:, 0] * y).clamp(min=0.0)
    total = probs.sum(dim=-1)
    error = _probability_error(matrix, inverse, y, 0)
    live = ok & (error <= TOLERANCE) & (total > 0) & torch.isfinite(total)
    first = torch.zeros_like(probs)
    first[:, 0] = 1.0
    return draw_index(torch.where(live[:, None], probs, first), generator) + 1, live


def _sequential_conditioning(
    w: Tensor, effective: Tensor, live: Tensor, generator: torch.Generator | None
) -> tuple[Tensor, Tensor]:
    """Heads ``[M, N+1]`` drawn word by word from the multi-root distribution of ``w``, and
    ``stop [M]``: the first word not drawn (``effective + 1`` when the sample is complete).

    Keeps ``A^{-1}`` current by a Sherman-Morrison update per fixed row (O(N^2) each), recomputes
    it from the Laplacian every ``REFRESH`` words, and checks each solution before drawing from it:
    a sample whose step is not provably accurate stops there (rows not ``live`` never start).
    """
    rows, size = w.shape[0], w.shape[1]
    words = size - 1
    device = w.device
    arcs = w[:, 1:, 1:]
    eye = torch.eye(words, dtype=torch.float64, device=device)
    laplacian = (
        torch.diag_embed(arcs.sum(dim=-1) + w[:, 1:, 0])
        - arcs
        + _padding_identity(effective, words)
    )
    laplacian = torch.where(live[:, None, None], laplacian, eye)
    inverse, ok = _checked_inverse(laplacian)
    live = live & ok
    stop = torch.where(live, effective + 1, torch.ones_like(effective))
    heads = torch.zeros(rows, size, dtype=torch.long, device=device)
    # top[i]: where following the heads drawn so far from i ends (an undrawn word, or ROOT).
    top = torch.arange(size, device=device).expand(rows, size).clone()
    root_only = torch.zeros(rows, size, dtype=torch.float64, device=device)
    root_only[:, 0] = 1.0
    for dep in range(1, int(effective.max()) + 1):
        k = dep - 1
        if k > 0 and k % REFRESH == 0:
            inverse, ok = _checked_inverse(laplacian)
        else:
            ok = torch.ones_like(live)
        x = inverse[:, :, k]  # A^{-1} e_dep
        x_dep = x[:, k : k + 1]
        probs = torch.cat([w[:, dep, :1] * x_dep, w[:, dep, 1:] * (x_dep - x)], dim=-1)
        probs = probs.masked_fill(top == dep, 0.0).clamp(min=0.0)
        total = probs.sum(dim=-1)
        error = _probability_error(laplacian, inverse, x, k)
        accurate = ok & (error <= TOLERANCE) & (total > 0) & torch.isfinite(total)
        lost = live & (dep <= effective) & ~accurate
        live = live & ~lost
        stop = torch.where(lost, torch.full_like(stop, dep), stop)
        active = live & (dep <= effective)
        probs = torch.where(active[:, None], probs, root_only)
        head = draw_index(probs, generator)
        heads[:, dep] = torch.where(active, head, torch.zeros_like(head))
        # Row dep becomes b = e_dep - e_head (e_dep alone for ROOT): "dep's head is head".
        word_head = (head > 0)[:, None]
        head_row = (head - 1).clamp(min=0)[:, None]
        fixed = eye[k].expand(rows, words) - eye[head_row.squeeze(1)] * word_head
        laplacian[:, k] = torch.where(active[:, None], fixed, laplacian[:, k])
        # Sherman-Morrison for A + e_dep (b - a)^T, using a^T A^{-1} = e_dep^T:
        # denominator b^T A^{-1} e_dep = p(dep -> head) / w[dep, head] > 0.
        x_head = torch.where(word_head, x.gather(1, head_row), torch.zeros_like(x_dep))
        denominator = torch.where(active[:, None], x_dep - x_head, torch.ones_like(x_dep))
        inverse_head = torch.where(
            word_head[:, :, None],
            inverse.gather(1, head_row[:, :, None].expand(rows, 1, words)),
            0.0,
        ).squeeze(1)
        change = inverse[:, k] - inverse_head - eye[k]
        change = torch.where(active[:, None], change, torch.zeros_like(change))
        inverse = inverse - x[:, :, None] * (change / denominator)[:, None, :]
        new_top = top.gather(1, head[:, None])
        top = torch.where((top == dep) & active[:, None], new_top, top)
    return heads, stop


REFRESH = 32  # words between fresh inverses in the sequential sampler
# Largest provable error of a conditional probability for a fast-path draw (else: the fallback).
# The bound is worst-case rounding (eps N per dot product), so typical errors are far smaller.
TOLERANCE = 1e-8
