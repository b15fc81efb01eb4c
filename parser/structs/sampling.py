"""Exact sampling of dependency trees from p(t) ∝ exp(sum of arc scores).

Sequential conditioning on marginals, batched over samples and sentences (no Python loop over
either): words are visited in order 1..N; word ``d``'s head is drawn from its marginal given the
heads already drawn, then fixed. Fixing ``head(d) = h`` replaces row ``d`` of the Laplacian by
``e_d - e_h`` (``e_d`` for ROOT), which keeps the matrix-tree theorem valid for the conditioned
distribution, so the next conditional marginal is again one linear solve:

    x = A^{-1} e_d,   p(d -> h) = w[d, h] (x_d - x_h),   p(d -> ROOT) = r_d x_d

(multi-root Laplacian ``A[d,d] = r_d + sum_h w[d,h]``, ``A[d,h] = -w[d,h]``, rows = dependents).
Single-root trees first draw the root's only child ``c`` from the root marginals of Koo et al.'s
(2007) matrix, then keep only the root arc of ``c``: multi-root trees of that graph are exactly the
single-root trees with root child ``c``. Arcs that would close a cycle with heads already drawn are
excluded explicitly (their exact probability is 0), so every sample is a tree even when rounding
leaves ``x_d - x_h`` a hair above 0. Cost: N solves of ``[n*B, N, N]`` float64 systems.

Exactness: the conditionals are exact up to float64 rounding of the solves (Wilson's algorithm
would be exact but can take exponentially many steps when scores are large). Range: when score
gaps inside a dependent's row exceed about 50 nats, weights underflow and the Laplacian can be
numerically singular; that raises ``FloatingPointError`` rather than returning wrong samples.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.mst import check_scores_and_lengths

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
    check_scores_and_lengths(scores, lengths)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected a positive int number of samples, got {n!r}")
    batch, size = scores.shape[0], scores.shape[1]
    device = scores.device
    if size == 1 or batch == 0:
        return torch.zeros(n, batch, size, dtype=torch.long, device=device)
    with torch.no_grad():
        w = _shifted_weights(scores, lengths, single_root=single_root)
        effective = lengths.to(device).clamp(min=1)
        w = w.repeat(n, 1, 1)  # [n*B, dep, head], sample-major
        effective = effective.repeat(n)
        if single_root:
            child = _draw_root_child(w, effective, batch, generator)
            keep = torch.zeros_like(w[:, :, 0])
            keep.scatter_(1, child[:, None], 1.0)
            w[:, :, 0] = w[:, :, 0] * keep
        heads = _sequential_conditioning(w, effective, batch, generator)
    real = torch.arange(size, device=device)[None, :] <= lengths.to(device).repeat(n)[:, None]
    return (heads * real).view(n, batch, size)


def _shifted_weights(scores: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor:
    """``exp(scores - rowmax)`` in float64 ``[B, dep, head]``, 0 on forbidden arcs and padding.

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
    return w


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


def _padding_identity(effective: Tensor, words: int) -> Tensor:
    """``[M, words, words]`` diagonal with 1 on the rows of padding words."""
    pad = torch.arange(1, words + 1, device=effective.device)[None, :] > effective[:, None]
    return torch.diag_embed(pad.to(torch.float64))


def _draw(probs: Tensor, generator: torch.Generator | None) -> Tensor:
    """One index per row of the unnormalised, non-negative ``probs [M, K]`` (inverse CDF)."""
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator, device=probs.device, dtype=probs.dtype)
    choice = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(1)
    # u * total can round up to total; never return a zero-probability tail index.
    last = probs.shape[1] - 1 - (probs > 0).flip(-1).to(torch.int8).argmax(dim=-1)
    return torch.minimum(choice, last)


def _precision_lost(bad: Tensor, batch: int) -> FloatingPointError:
    # The graph has a tree (checked up front), so this is float64 range, not bad input.
    sentence = int(bad.nonzero()[0]) % batch
    return FloatingPointError(
        f"scores: sentence {sentence}: the float64 Laplacian is numerically singular (score gaps "
        "within a dependent's row beyond about 50); temper the scores before sampling"
    )


def _inverse(matrix: Tensor, batch: int) -> Tensor:
    try:
        return torch.linalg.inv(matrix)
    except torch.linalg.LinAlgError:
        singular = torch.linalg.matrix_rank(matrix) < matrix.shape[-1]
        raise _precision_lost(singular, batch) from None


def _draw_root_child(
    w: Tensor, effective: Tensor, batch: int, generator: torch.Generator | None
) -> Tensor:
    """Root child ``[M]`` (word index) drawn from the single-root marginals of ROOT's arcs.

    Koo's matrix: rows = dependents, column 0 holds the root weights ``r``; ``p(d -> ROOT) =
    r_d (K^{-1})[0, d-1]``, i.e. ``r`` times the solution of ``K^T y = e_0``.
    """
    words = w.shape[1] - 1
    arcs = w[:, 1:, 1:]
    koo = torch.diag_embed(arcs.sum(dim=-1)) - arcs + _padding_identity(effective, words)
    koo[:, :, 0] = w[:, 1:, 0]
    first = torch.zeros(w.shape[0], words, 1, dtype=torch.float64, device=w.device)
    first[:, 0] = 1.0
    y = (_inverse(koo.transpose(-1, -2), batch) @ first).squeeze(-1)
    probs = (w[:, 1:, 0] * y).clamp(min=0.0)
    total = probs.sum(dim=-1)
    bad = ~(total > 0) | ~torch.isfinite(total)
    if bool(bad.any()):
        raise _precision_lost(bad, batch)
    return _draw(probs, generator) + 1


def _sequential_conditioning(
    w: Tensor, effective: Tensor, batch: int, generator: torch.Generator | None
) -> Tensor:
    """Heads ``[M, N+1]`` drawn word by word from the multi-root distribution of ``w``.

    Keeps ``A^{-1}`` current by a Sherman-Morrison update per fixed row (O(N^2) each), and
    recomputes it from the Laplacian every ``REFRESH`` words so rounding cannot accumulate.
    """
    rows, size = w.shape[0], w.shape[1]
    words = size - 1
    device = w.device
    arcs = w[:, 1:, 1:]
    laplacian = (
        torch.diag_embed(arcs.sum(dim=-1) + w[:, 1:, 0])
        - arcs
        + _padding_identity(effective, words)
    )
    inverse = _inverse(laplacian, batch)
    eye = torch.eye(words, dtype=torch.float64, device=device)
    heads = torch.zeros(rows, size, dtype=torch.long, device=device)
    # top[i]: where following the heads drawn so far from i ends (an undrawn word, or ROOT).
    top = torch.arange(size, device=device).expand(rows, size).clone()
    root_only = torch.zeros(rows, size, dtype=torch.float64, device=device)
    root_only[:, 0] = 1.0
    for dep in range(1, int(effective.max()) + 1):
        k = dep - 1
        if k > 0 and k % REFRESH == 0:
            inverse = _inverse(laplacian, batch)
        active = dep <= effective
        x = inverse[:, :, k]  # A^{-1} e_dep
        x_dep = x[:, k : k + 1]
        probs = torch.cat([w[:, dep, :1] * x_dep, w[:, dep, 1:] * (x_dep - x)], dim=-1)
        probs = probs.masked_fill(top == dep, 0.0).clamp(min=0.0)
        total = probs.sum(dim=-1)
        bad = active & (~(total > 0) | ~torch.isfinite(total))
        if bool(bad.any()):
            raise _precision_lost(bad, batch)
        probs = torch.where(active[:, None], probs, root_only)
        head = _draw(probs, generator)
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
    return heads


REFRESH = 32  # words between fresh inverses in the sequential sampler
