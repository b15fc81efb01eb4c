"""Brute-force enumeration of tag sequences, the reference the linear-chain tests compare with.

Only for tiny inputs: there are S^n sequences of n tags over S states. Conventions are those of
``parser.structs.chain``: ``scores [pos, prev, cur]`` of one sentence, start scores in row 0
of position 0.
"""

from __future__ import annotations

import itertools

import torch
from torch import Tensor


def all_sequences(n: int, states: int) -> list[tuple[int, ...]]:
    """Every sequence of ``n`` tags over ``states`` states, in lexicographic order."""
    return list(itertools.product(range(states), repeat=n))


def features(seq: tuple[int, ...], positions: int, states: int) -> Tensor:
    """``[pos, prev, cur]`` float64 indicator of the pairs a sequence uses (the start is prev 0)."""
    out = torch.zeros(positions, states, states, dtype=torch.float64)
    prev = 0
    for i, cur in enumerate(seq):
        out[i, prev, cur] = 1.0
        prev = cur
    return out


def enumerate_chain(scores: Tensor, n: int):
    """Exact distribution of one sentence of ``n`` positions.

    Returns ``(seqs, feats [K, pos, prev, cur], log_weights [K], log_z)``.
    """
    positions, states = scores.shape[0], scores.shape[-1]
    seqs = all_sequences(n, states)
    feats = torch.stack([features(seq, positions, states) for seq in seqs])
    log_weights = (feats * scores.to(torch.float64)).sum(dim=(1, 2, 3))
    return seqs, feats, log_weights, torch.logsumexp(log_weights, 0)


def brute_quantities(scores: Tensor, n: int) -> dict[str, Tensor]:
    """log Z, pairwise marginals, entropy and the pair-feature covariance of one sentence."""
    _, feats, log_weights, log_z = enumerate_chain(scores, n)
    probs = (log_weights - log_z).exp()
    marginals = torch.einsum("k,kipc->ipc", probs, feats)
    flat = feats.flatten(1)
    covariance = torch.einsum("k,kx,ky->xy", probs, flat, flat) - torch.outer(
        flat.T @ probs, flat.T @ probs
    )
    return {
        "log_z": log_z,
        "marginals": marginals,
        "entropy": -(probs * (log_weights - log_z)).sum(),
        "covariance": covariance.reshape(*scores.shape, *scores.shape),
    }


def brute_kl(p_scores: Tensor, q_scores: Tensor, n: int) -> Tensor:
    """KL(p || q) of one sentence by enumeration."""
    _, _, p_log_weights, p_log_z = enumerate_chain(p_scores, n)
    _, _, q_log_weights, q_log_z = enumerate_chain(q_scores, n)
    log_p, log_q = p_log_weights - p_log_z, q_log_weights - q_log_z
    return (log_p.exp() * (log_p - log_q)).sum()
