"""Slow published routes to the linear-chain entropy gradient, kept only for tests and benchmarks.

Jiao et al. (2006), "Semi-supervised conditional random fields for improved sequence segmentation
and labeling": the gradient of the entropy is minus the covariance of the score features with
``log p``, ``dH / dscores[i, a, b] = -Cov(f_iab, score(y))``, where ``f_iab`` indicates the pair
``(y[i-1], y[i]) = (a, b)``. The covariance of two factors needs two-position marginals
``p(y[j] = c | y[i] = b)`` for every pair of positions: O(n^2 s^3) time, against the O(n s^2) of
``chain_entropy`` (Mann & McCallum 2007).

Conventions are those of ``parser.structs.chain.crf``.
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


def _conditionals(scores: Tensor, lengths: Tensor):
    """Cleaned scores, pairwise marginals and the one-step conditionals of the chain.

    Returns ``(scores, mu [B, pos, prev, cur], ahead [B, pos, prev, cur], behind [B, pos, cur, prev])``
    with ``ahead[i, a, b] = p(y[i] = b | y[i-1] = a)`` and ``behind[i, b, a] = p(y[i-1] = a | y[i] = b)``
    for ``1 <= i < lengths``; both are 0 elsewhere, so chains through padding vanish.
    """
    check_chain(scores, lengths)
    scores = clean_scores(scores.detach(), lengths)
    alpha = forward_lattice(scores, lengths)
    beta = backward_lattice(scores, lengths)
    log_z = torch.logsumexp(alpha[:, -1], dim=-1)
    mask = factor_mask(lengths, scores.shape[1], scores.shape[-1])
    mu = torch.where(mask, log_pairwise(scores, alpha, beta, log_z).exp(), torch.zeros_like(scores))

    inner = position_mask(lengths, scores.shape[1])[:, :, None, None].clone()
    inner[:, 0] = False
    zeros = torch.zeros_like(scores)
    alpha_prev = torch.cat([torch.zeros_like(alpha[:, :1]), alpha[:, :-1]], dim=1)
    beta_prev = torch.cat([torch.zeros_like(beta[:, :1]), beta[:, :-1]], dim=1)
    ahead = torch.where(inner, (scores + beta.unsqueeze(-2) - beta_prev.unsqueeze(-1)).exp(), zeros)
    behind = (alpha_prev.unsqueeze(-1) + scores - alpha.unsqueeze(-2)).exp()
    behind = torch.where(inner, behind, zeros).transpose(-1, -2)
    return scores, mu, ahead, behind


def entropy_gradient_jiao(scores: Tensor, lengths: Tensor) -> Tensor:
    """``[B, pos, prev, cur]`` entropy gradient as ``-Cov(f, score)``, in O(n^2 s^3).

    ``E[score | (y[i-1], y[i]) = (a, b)] = scores[i, a, b] + later[i, b] + earlier[i, a]``, where
    ``later[i, b] = sum_{j > i} E[scores_j | y[i] = b]`` runs the conditionals ``p(y[j-1] | y[i])``
    forward from every ``i`` and ``earlier[i, a] = sum_{j < i} E[scores_j | y[i-1] = a]`` runs them
    backward: one s x s matrix product per pair of positions.
    """
    with torch.no_grad():
        scores, mu, ahead, behind = _conditionals(scores, lengths)
        batch, positions, states = scores.shape[:3]
        # E[scores_j | y[j-1] = c] and E[scores_j | y[j] = d]; the latter is the start score at j = 0
        given_prev = (ahead * scores).sum(dim=-1)
        given_cur = (behind * scores.transpose(-1, -2)).sum(dim=-1)
        given_cur[:, 0] = scores[:, 0, 0, :]
        given_cur = torch.where(position_mask(lengths, positions)[..., None], given_cur, 0.0)

        eye = torch.eye(states, dtype=scores.dtype, device=scores.device)
        later = torch.zeros(batch, positions, states, dtype=scores.dtype, device=scores.device)
        chain = eye.expand(batch, positions - 1, states, states)  # p(y[i+k-1] | y[i]) for i < T-k
        for k in range(1, positions):
            count = positions - k
            chain = chain[:, :count]
            if k > 1:
                chain = chain @ ahead[:, k - 1 : k - 1 + count]
            later[:, :count] += (chain @ given_prev[:, k : k + count, :, None]).squeeze(-1)

        earlier = torch.zeros_like(later)
        chain = eye.expand(batch, positions - 1, states, states)  # p(y[i-k] | y[i-1]) for i >= k
        for k in range(1, positions):
            count = positions - k
            chain = chain[:, -count:]
            if k > 1:
                chain = chain @ behind[:, 1 : 1 + count]
            earlier[:, k:] += (chain @ given_cur[:, :count, :, None]).squeeze(-1)

        expected = (mu * scores).sum(dim=(1, 2, 3))
        conditional = scores + later.unsqueeze(-2) + earlier.unsqueeze(-1)
        return -mu * (conditional - expected[:, None, None, None])


def pairwise_feature_covariance(scores: Tensor, lengths: Tensor) -> Tensor:
    """``[B, pos, prev, cur, pos', prev', cur']`` covariance of the pair indicators ``f_iab, f_jcd``,
    materialised (O(n^2 s^4) memory: tiny inputs only); 0 on entries that do not count.

    For ``j > i``: ``E[f_iab f_jcd] = mu[i, a, b] p(y[j-1] = c | y[i] = b) p(y[j] = d | y[j-1] = c)``.
    """
    with torch.no_grad():
        scores, mu, ahead, _ = _conditionals(scores, lengths)
        batch, positions, states = scores.shape[:3]
        eye = torch.eye(states, dtype=scores.dtype, device=scores.device)
        joint = torch.zeros(
            batch, positions, states, states, positions, states, states, dtype=scores.dtype
        )
        for i in range(positions):
            joint[:, i, :, :, i] = torch.diag_embed(mu[:, i].reshape(batch, -1)).reshape(
                batch, states, states, states, states
            )
            reach = eye.expand(batch, states, states)  # p(y[j-1] | y[i])
            for j in range(i + 1, positions):
                both = (
                    mu[:, i, :, :, None, None]
                    * reach[:, None, :, :, None]
                    * ahead[:, j, None, None]
                )
                joint[:, i, :, :, j] = both
                joint[:, j, :, :, i] = both.permute(0, 3, 4, 1, 2)
                reach = reach @ ahead[:, j]
        return joint - mu[:, :, :, :, None, None, None] * mu[:, None, None, None]
