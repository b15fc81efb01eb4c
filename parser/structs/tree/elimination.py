"""Robust path: log Z by subtraction-free elimination of words in log space (Kron reduction).

Used for the sentences whose Laplacian is too ill-conditioned for LU (large score gaps). Works on
``w[b, head, dep]`` log-weights (the transpose of ``scores[b, dep, head]``), node 0 = ROOT.

Eliminating word ``k`` is one step of Gaussian elimination on the Laplacian, and every quantity
stays a sum of positive terms: the pivot is ``p_k = logsumexp_h w[h, k]`` (k's incoming arcs,
ROOT included for multi-root trees), ``log Z`` gains ``p_k``, and every remaining arc becomes
``w[h, d] <- logaddexp(w[h, d], w[h, k] + w[k, d] - p_k)`` (ROOT arcs included; the reduced
graph's Laplacian is the Schur complement). For single-root trees the pivots use word arcs only
and ROOT arcs are carried to first order (single-root Z is the derivative of multi-root Z in a
scale ``t`` of the ROOT weights at ``t = 0``); the last word contributes its reduced ROOT weight.
The next word to eliminate is, per sentence, the remaining word with the largest pivot: a zero
pivot before the last word then means no single-root tree exists (in a tree over >= 2 remaining
words every word but the ROOT's child has a word head), so log Z = -inf exactly.

The loop runs over positions (batched over sentences) and costs O(N^3); marginals come from
autograd through it, in segments recomputed on the backward pass to bound memory.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

__all__ = [
    "arc_pair_marginals_by_elimination", "covariance_by_elimination", "log_partition_by_elimination",
    "pairwise_marginals_by_elimination",
]

NEG_INF = float("-inf")
SEGMENT = 16  # elimination steps per recomputed segment
CHECKPOINT_BYTES = 256 * 2**20


def _exp_below(x: Tensor, out: Tensor) -> Tensor:
    """``exp(x - out)`` (``x <= out``) with 0 where ``out = -inf`` (no NaN from ``-inf - -inf``;
    the where keeps its derivatives NaN-free too: the discarded branch only gets zeros)."""
    return torch.exp(torch.where(torch.isneginf(out), NEG_INF, x - out))


def _normalised(weights: Tensor, total: Tensor) -> Tensor:
    """``weights / total`` (0 where ``total`` is 0). The softmax ``exp(x - out)`` sums to 1 only
    while ``out`` resolves the log of the count of tied terms: at |x| ~ 1e100, ``log 2`` is lost
    in ``out``'s rounding and two tied terms get weight 1 each (marginal rows summing to 2).
    Dividing by the sum is exact in exact arithmetic (the weights are invariant to ``out``)."""
    return weights / torch.where(total > 0, total, torch.ones_like(total))


class _LogAddExp(torch.autograd.Function):
    """``torch.logaddexp`` with the backward ``(g e^(a - out), g e^(b - out))`` written in torch
    ops, so that its own derivative stays finite at huge gaps (torch's gives inf / inf) and at
    ``a = b = -inf`` (an absent arc: gradient 0, not NaN)."""

    @staticmethod
    def forward(ctx, a: Tensor, b: Tensor) -> Tensor:
        out = torch.logaddexp(a, b)
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        a, b, out = ctx.saved_tensors
        first, second = _exp_below(a, out), _exp_below(b, out)
        total = first + second
        return grad * _normalised(first, total), grad * _normalised(second, total)


class _LogSumExp(torch.autograd.Function):
    """``torch.logsumexp(x, 1)`` whose backward (the softmax, in torch ops) is 0 where every
    input is -inf (torch's is NaN there)."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        out = torch.logsumexp(x, 1)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, out = ctx.saved_tensors
        weights = _exp_below(x, out[:, None])
        return grad[:, None] * _normalised(weights, weights.sum(1, keepdim=True))


def _step(w: Tensor, alive: Tensor, log_z: Tensor, step: int, lengths: Tensor, single_root: bool):
    """Eliminate one slot per sentence and drop it: ``w [B, m+1, m+1] -> [B, m, m]``.

    ``w[b, head, dep]`` log-weights, ``-inf`` for non-arcs (the log-space operations above are
    NaN-free at ``-inf``, values and derivatives); ``alive [B, m+1]`` marks the words not yet
    eliminated. Sentences already done drop one of their padding slots instead.
    """
    batch = torch.arange(w.shape[0], device=w.device)
    slots = torch.arange(w.shape[-1], device=w.device)
    active = step < lengths
    last = step == lengths - 1
    pivots = _LogSumExp.apply(w[:, 1:] if single_root else w)  # [B, dep]
    # A word without heads (pivot -inf) still outranks the dead slots (ROOT, eliminated, padding).
    lowest = torch.finfo(w.dtype).min
    key = torch.where(alive, pivots.detach().clamp(min=lowest), torch.full_like(pivots, NEG_INF))
    spare = torch.where(slots > 0, 0.0, NEG_INF).to(w.dtype).expand_as(key)
    k = torch.where(active[:, None], key, spare).argmax(-1)
    pivot = pivots[batch, k]
    gain = w[batch, 0, k] if single_root else pivot
    gain = torch.where(last, gain, pivot)
    log_z = log_z + torch.where(active, gain, torch.zeros_like(gain))

    # A -inf pivot (no tree: log Z is already -inf) divides by 1 instead, keeping w NaN-free.
    divisor = torch.where(torch.isneginf(pivot), torch.zeros_like(pivot), pivot)
    into_k = w[batch, :, k]  # [B, head]
    out_of_k = w[batch, k, :] - divisor[:, None]  # [B, dep]
    w = _LogAddExp.apply(w, into_k[:, :, None] + out_of_k[:, None, :])
    w = w.masked_fill(torch.eye(w.shape[-1], dtype=torch.bool, device=w.device), NEG_INF)
    # Drop slot k (k >= 1, so ROOT stays at 0).
    size = w.shape[-1] - 1
    keep = torch.arange(size, device=w.device)[None, :]
    keep = keep + (keep >= k[:, None]).long()
    w = w.gather(1, keep[:, :, None].expand(-1, -1, size + 1))
    w = w.gather(2, keep[:, None, :].expand(-1, size, -1))
    return w, alive.gather(1, keep), log_z


def _segment(w, alive, log_z, start, stop, lengths, single_root):
    for step in range(start, stop):
        w, alive, log_z = _step(w, alive, log_z, step, lengths, single_root)
    return w, alive, log_z


def log_partition_by_elimination(scores: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor:
    """``scores [B, dep, head]`` (masked, float64) -> ``log Z [B]``, differentiable (twice).

    Exact up to float64 rounding in log space: no subtraction of positive quantities occurs.
    Each word's scores are first shifted by their maximum (every tree has one arc per word, so
    log Z moves by the sum of the shifts, added back at the end; the shift is a constant for
    autograd, which is exact): the log-weights inside are then in ``[-span, 0]`` and a path of
    up to N arcs stays finite while ``|score| < float64 max / (4 N)``.
    """
    size = scores.shape[-1]
    positions = torch.arange(size, device=scores.device)
    alive = (positions > 0) & (positions <= lengths[:, None])
    heads = alive | (positions == 0)
    real = alive[:, :, None] & heads[:, None, :] & (positions[:, None] != positions[None, :])
    scores = scores.masked_fill(~real, NEG_INF)
    shift = scores.detach().amax(-1)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))  # no arcs: log Z -inf anyway
    w = (scores - shift[:, :, None]).transpose(-1, -2)
    log_z = torch.zeros(scores.shape[0], dtype=scores.dtype, device=scores.device)
    steps = int(lengths.max()) if lengths.numel() else 0
    # Autograd keeps about 5 [B, m, m] tensors per step, sum over m: ~5/3 B N^3 values. Recompute
    # segments on the backward pass only when that is large (checkpoint's first use is slow).
    stored = 5 / 3 * scores.shape[0] * steps**3 * scores.element_size()
    track = torch.is_grad_enabled() and scores.requires_grad and stored > CHECKPOINT_BYTES
    for start in range(0, steps, SEGMENT):
        stop = min(start + SEGMENT, steps)
        if track:
            w, alive, log_z = checkpoint(
                _segment, w, alive, log_z, start, stop, lengths, single_root, use_reentrant=False
            )
        else:
            w, alive, log_z = _segment(w, alive, log_z, start, stop, lengths, single_root)
    return log_z + shift.sum(-1)


# ----------------------------------------------------------------- second order on this path
def _marginals_with_graph(scores: Tensor, lengths: Tensor, *,
                          single_root: bool) -> tuple[Tensor, Tensor]:
    """``(leaf, marginals [B, dep, head])``: marginals that stay differentiable in ``leaf``
    (``scores`` itself when it carries a graph, else a detached copy)."""
    leaf = scores if scores.requires_grad else scores.clone().requires_grad_()
    log_z = log_partition_by_elimination(leaf, lengths, single_root=single_root)
    (marginals,) = torch.autograd.grad(log_z.sum(), leaf, create_graph=True)
    keep = torch.isfinite(log_z)[:, None, None] & torch.isfinite(scores)
    return leaf, torch.where(keep, marginals, torch.zeros_like(marginals))


def _hessian_rows(marginals: Tensor, leaf: Tensor, weights: Tensor, *, graph: bool) -> Tensor:
    """``d <marginals, weights> / d scores`` ``[B, dep, head]`` (one backward pass)."""
    if not marginals.requires_grad:  # e.g. one-word sentences: constant marginals
        return torch.zeros_like(leaf)
    (rows,) = torch.autograd.grad((marginals * weights).sum(), leaf, retain_graph=True,
                                  create_graph=graph, allow_unused=True)
    return torch.zeros_like(leaf) if rows is None else rows


def covariance_by_elimination(scores: Tensor, lengths: Tensor, first: Tensor, second: Tensor, *,
                              single_root: bool) -> Tensor:
    """``Cov [B, R, S]`` of arc features ``first [B, dep, head, R]``, ``second [.., S]`` (float64,
    zero off arcs) from the Hessian of the exact log Z: ``Cov(r, s) = r^T (d^2 log Z) s``.

    One backward pass per column of the narrower feature set: O(N^3 min(R, S)); for the few
    sentences LU cannot handle. Differentiable when ``scores`` carries a graph.
    """
    graph = torch.is_grad_enabled() and scores.requires_grad
    with torch.inference_mode(False), torch.enable_grad():  # autograd cannot record inference tensors
        leaf, marginals = _marginals_with_graph(scores, lengths, single_root=single_root)
        swap = first.shape[-1] < second.shape[-1]  # Cov(r, s) = Cov(s, r)^T: loop the narrower
        loop, other = (first, second) if swap else (second, first)
        loop = loop.clone() if loop.is_inference() else loop
        columns = [_hessian_rows(marginals, leaf, loop[..., j], graph=graph)
                   for j in range(loop.shape[-1])]
    hess = torch.stack(columns, -1) if columns else loop.new_zeros(loop.shape)
    hess = torch.where(torch.isfinite(scores)[..., None], hess, torch.zeros_like(hess))
    cov = torch.einsum("bdho,bdhl->bol", other, hess)  # [B, other, loop]
    cov = cov.transpose(-1, -2) if swap else cov
    return cov if graph else cov.detach()


def pairwise_marginals_by_elimination(scores: Tensor, lengths: Tensor, *,
                                      single_root: bool) -> Tensor:
    """``[B, i, j, k, l]`` = p(head(i) = j, head(k) = l) from the exact path's second derivatives:
    ``p(e, e') = mu_e mu_e' + d mu_e / d score_e'`` for arcs of different dependents, ``mu_e`` when
    ``e = e'``, 0 for two heads of one word. N (N + 1) backward passes: O(N^5)."""
    graph = torch.is_grad_enabled() and scores.requires_grad
    size = scores.shape[-1]
    arcs = torch.isfinite(scores)
    with torch.inference_mode(False), torch.enable_grad():  # autograd cannot record inference tensors
        leaf, marginals = _marginals_with_graph(scores, lengths, single_root=single_root)
        rows = []
        for dep in range(1, size):
            for head in range(size):
                pick = torch.zeros_like(scores)
                pick[:, dep, head] = 1.0
                rows.append(_hessian_rows(marginals, leaf, pick, graph=graph)
                            if bool(arcs[:, dep, head].any()) else torch.zeros_like(scores))
    hess = torch.stack(rows, 1).reshape(scores.shape[0], size - 1, size, size, size)
    hess = torch.cat([torch.zeros_like(hess[:, :1]), hess], 1)  # [B, k, l, i, j]; row k = 0 is 0
    hess = hess.permute(0, 3, 4, 1, 2)  # [B, i, j, k, l]: d mu_(k,l) / d score_(i,j)
    pair = marginals[:, :, :, None, None] * marginals[:, None, None, :, :] + hess
    eye = torch.eye(size, dtype=torch.bool, device=scores.device)
    same_dep = eye[:, None, :, None]  # i == k
    same_arc = same_dep & eye[None, :, None, :]
    diagonal = marginals[:, :, :, None, None].expand_as(pair)
    pair = torch.where(same_dep, torch.where(same_arc, diagonal, torch.zeros_like(pair)), pair)
    both = arcs[:, :, :, None, None] & arcs[:, None, None, :, :]
    pair = torch.where(both, pair, torch.zeros_like(pair))
    return pair if graph else pair.detach()


def arc_pair_marginals_by_elimination(scores: Tensor, lengths: Tensor, first: Tensor, second: Tensor, *,
                                      single_root: bool) -> Tensor:
    """``[K]`` p(arc ``first[k]`` and arc ``second[k]``) (rows ``(b, dep, head)``, ``b`` into
    ``scores``) from the exact path: ``mu_e mu_f + d mu_e / d score_f`` for arcs of different
    dependents, ``mu_e`` for ``e = f``, 0 for two heads of one word. One backward pass per distinct
    ``first`` arc; differentiable when ``scores`` carries a graph."""
    graph = torch.is_grad_enabled() and scores.requires_grad
    with torch.inference_mode(False), torch.enable_grad():  # autograd cannot record inference tensors
        leaf, marginals = _marginals_with_graph(scores, lengths, single_root=single_root)
        distinct, which = torch.unique(first, dim=0, return_inverse=True)
        derivative = scores.new_zeros(first.shape[0])
        for index, (b, dep, head) in enumerate(distinct.tolist()):
            pick = torch.zeros_like(scores)
            pick[b, dep, head] = 1.0
            rows = _hessian_rows(marginals, leaf, pick, graph=graph)  # d mu_e / d scores
            mine = (which == index).nonzero().squeeze(1)
            derivative = derivative.index_put((mine,), rows[tuple(second[mine].t())])
    mu_e, mu_f = marginals[tuple(first.t())], marginals[tuple(second.t())]
    pair = mu_e * mu_f + derivative
    same_dep = first[:, 1] == second[:, 1]
    pair = torch.where(same_dep, torch.where(first[:, 2] == second[:, 2], mu_e, torch.zeros_like(pair)), pair)
    arcs = torch.isfinite(scores)
    pair = torch.where(arcs[tuple(first.t())] & arcs[tuple(second.t())], pair, torch.zeros_like(pair))
    return pair if graph else pair.detach()
