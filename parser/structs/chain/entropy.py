"""Entropy of a linear-chain CRF and its gradient in O(n s^2), by the subsequence-constrained entropy
lattices of Mann & McCallum (2007), "Efficient computation of entropy gradient for semi-supervised
conditional random fields".

Conventions are those of ``parser.structs.chain.crf`` (``scores [B, pos, prev, cur]``, start
scores in row 0 of position 0, ``lengths [B]`` counting positions).

Two lattices, each as cheap as one forward pass:

- forward:  ``h_fwd[i, cur]  = H(Y[0..i-1] | y[i] = cur)``, the entropy of the prefix given a tag;
- backward: ``h_bwd[i, prev] = H(Y[i+1..] | y[i] = prev)``, the entropy of the suffix given a tag.

By the Markov property, given the pair ``(y[i-1], y[i]) = (a, b)`` the prefix, the pair and the
suffix are independent, so ``E[log p | a, b] = log mu[i, a, b] - h_fwd[i-1, a] - h_bwd[i, b]``, and
the gradient of the entropy ``dH / dscores[i, a, b] = -Cov(f_iab, log p)`` is

    ``-mu[i, a, b] * (log mu[i, a, b] - h_fwd[i-1, a] - h_bwd[i, b] + H)``.

>>> import torch
>>> scores = torch.zeros(1, 2, 3, 3)
>>> gradient = entropy_gradient_mann_mccallum(scores, torch.tensor([2]))
>>> round(gradient.abs().max().item(), 5)  # uniform scores are a maximum of the entropy
0.0
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.chain.crf import (
    backward_lattice,
    check_chain,
    clean_scores,
    factor_mask,
    forward_lattice,
    log_pairwise,
    position_mask,
)


def _entropy_and_gradient(scores: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """``(entropy [B], gradient [B, pos, prev, cur])`` by the forward and backward entropy lattices."""
    check_chain(scores, lengths)
    with torch.no_grad():
        scores = clean_scores(scores.detach(), lengths)
        alpha = forward_lattice(scores, lengths)
        beta = backward_lattice(scores, lengths)
        log_z = torch.logsumexp(alpha[:, -1], dim=-1)
        h_fwd = _forward_entropy(scores, lengths, alpha)
        h_bwd = _backward_entropy(scores, lengths, beta)

        # H = sum_b p(y[n-1] = b) * (h_fwd[n-1, b] - log p(y[n-1] = b)); alpha and h_fwd are
        # carried through padding, so the last column is the last real position.
        log_last = alpha[:, -1] - log_z[:, None]
        entropy = (log_last.exp() * (h_fwd[:, -1] - log_last)).sum(dim=-1)

        log_mu = log_pairwise(scores, alpha, beta, log_z)
        h_prev = torch.cat([torch.zeros_like(h_fwd[:, :1]), h_fwd[:, :-1]], dim=1)
        conditional = log_mu - h_prev.unsqueeze(-1) - h_bwd.unsqueeze(-2)  # E[log p | pair]
        gradient = -log_mu.exp() * (conditional + entropy[:, None, None, None])
        mask = factor_mask(lengths, scores.shape[1], scores.shape[-1])
        gradient = torch.where(mask, gradient, torch.zeros_like(gradient))
    return entropy, gradient


def _forward_entropy(scores: Tensor, lengths: Tensor, alpha: Tensor) -> Tensor:
    """``h_fwd [B, pos, cur]``: entropy of the prefix before position i given ``y[i] = cur``."""
    alive = position_mask(lengths, scores.shape[1])
    h_fwd = [torch.zeros_like(alpha[:, 0])]  # nothing precedes position 0 but the start state
    for i in range(1, scores.shape[1]):
        # log p(y[i-1] = a | y[i] = b), which depends on the prefix only
        log_w = alpha[:, i - 1].unsqueeze(-1) + scores[:, i] - alpha[:, i].unsqueeze(-2)
        step = (log_w.exp() * (h_fwd[-1].unsqueeze(-1) - log_w)).sum(dim=-2)
        h_fwd.append(torch.where(alive[:, i, None], step, h_fwd[-1]))
    return torch.stack(h_fwd, dim=1)


def _backward_entropy(scores: Tensor, lengths: Tensor, beta: Tensor) -> Tensor:
    """``h_bwd [B, pos, prev]``: entropy of the suffix after position i given ``y[i] = prev``."""
    alive = position_mask(lengths, scores.shape[1])
    zeros = torch.zeros_like(beta[:, 0])
    h_bwd = [zeros]
    for i in range(scores.shape[1] - 1, 0, -1):
        # log p(y[i] = b | y[i-1] = a), which depends on the suffix only
        log_q = scores[:, i] + beta[:, i].unsqueeze(-2) - beta[:, i - 1].unsqueeze(-1)
        step = (log_q.exp() * (h_bwd[-1].unsqueeze(-2) - log_q)).sum(dim=-1)
        h_bwd.append(torch.where(alive[:, i, None], step, zeros))
    h_bwd.reverse()
    return torch.stack(h_bwd, dim=1)


def entropy_gradient_mann_mccallum(scores: Tensor, lengths: Tensor) -> Tensor:
    """``[B, pos, prev, cur]`` gradient of each sentence's entropy w.r.t. its scores, in O(n s^2);
    exactly 0 on entries that do not count (padding, rows 1.. of position 0)."""
    return _entropy_and_gradient(scores, lengths)[1]


class _MannMcCallumEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores: Tensor, lengths: Tensor) -> Tensor:  # type: ignore[override]
        entropy, gradient = _entropy_and_gradient(scores, lengths)
        ctx.save_for_backward(gradient)
        return entropy

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_entropy: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        (gradient,) = ctx.saved_tensors
        return grad_entropy[:, None, None, None] * gradient, None


def entropy_mann_mccallum(scores: Tensor, lengths: Tensor) -> Tensor:
    """``[B]`` entropy from the forward entropy lattice; its backward pass uses the Mann & McCallum
    gradient computed alongside (first order only: no double backward)."""
    return _MannMcCallumEntropy.apply(scores, lengths)
