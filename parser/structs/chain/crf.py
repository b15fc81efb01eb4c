"""The linear-chain CRF: an exact distribution over tag sequences, the sequence counterpart of the
tree CRF.

Conventions (shared by ``chain_entropy`` and ``chain_slow``):

- ``scores[b, i, prev, cur]``, float, ``[B, pos, prev, cur]``: the score of tag ``cur`` at position
  ``i`` after tag ``prev`` at position ``i - 1`` (transition and emission folded per position).
- Position 0 has no previous tag; a start state takes its place and it is index 0 of the ``prev``
  axis: only ``scores[:, 0, 0, :]`` (the start scores) counts at position 0, rows ``1..S-1`` of
  position 0 are ignored. Pairwise marginals put all of position 0's mass on row 0, so
  ``expect(features)`` reads ``features[:, 0, 0, cur]`` for the first tag.
- ``lengths[b]`` counts positions (``1 <= lengths[b] <= T``); positions ``i >= lengths[b]`` are
  padding: their scores are ignored, their marginals are exactly 0, decoded and sampled tags are 0.
- Scores must be finite where they count; forbid a transition with a large negative score
  (e.g. ``-1e4``), not ``-inf``, so that gradients stay finite.

The score of a sequence ``y`` of length ``n`` is ``sum_i scores[i, y[i-1], y[i]]`` with ``y[-1] = 0``
and ``p(y) = exp(score(y) - log_partition)``. Everything is batched and in log space; the only
Python loops run over positions, as the recursions demand.

>>> import torch
>>> scores = torch.zeros(1, 3, 2, 2)
>>> dist = LinearChainCRF(scores, torch.tensor([3]))
>>> round(float(dist.log_partition.exp()), 4)  # 2 ** 3 sequences of score 0
8.0
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Distribution, register_kl

from parser.structs.decoding.native import native_viterbi


def check_chain(scores: Tensor, lengths: Tensor) -> None:
    """Raise ``ValueError`` unless ``scores [B, pos, prev, cur]`` and ``lengths [B]`` fit together."""
    if scores.dim() != 4 or scores.shape[-1] != scores.shape[-2]:
        raise ValueError(
            f"scores must be [B, T, S, S] (pos, prev, cur); got shape {tuple(scores.shape)}"
        )
    if not scores.is_floating_point():
        raise ValueError(f"scores must be floating point; got dtype {scores.dtype}")
    batch, positions = scores.shape[:2]
    if lengths.dim() != 1 or lengths.shape[0] != batch:
        raise ValueError(f"lengths must be [B] with B={batch}; got shape {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be an integer tensor; got dtype {lengths.dtype}")
    bad = (lengths < 1) | (lengths > positions)
    if bad.any():
        b = int(bad.nonzero()[0, 0])
        raise ValueError(
            f"lengths[{b}] = {int(lengths[b])} is outside 1..{positions} (T of scores)"
        )
    counted = factor_mask(lengths, positions, scores.shape[-1])
    broken = counted & ~torch.isfinite(scores)
    if broken.any():
        b, i, prev, cur = (int(x) for x in broken.nonzero()[0])
        raise ValueError(
            f"scores[{b}, {i}, {prev}, {cur}] = {float(scores[b, i, prev, cur])} is not finite; "
            "use a large negative score to forbid a transition"
        )


def position_mask(lengths: Tensor, positions: int) -> Tensor:
    """``[B, pos]`` True where position ``i < lengths[b]``."""
    return torch.arange(positions, device=lengths.device) < lengths[:, None]


def factor_mask(lengths: Tensor, positions: int, states: int) -> Tensor:
    """``[B, pos, prev, cur]`` True on the score entries that count (row 0 only at position 0)."""
    alive = position_mask(lengths, positions)[:, :, None, None]
    not_start = torch.arange(positions, device=lengths.device)[:, None, None] > 0
    start_row = torch.arange(states, device=lengths.device)[:, None] == 0
    return (alive & (not_start | start_row)).expand(-1, positions, states, states)


def clean_scores(scores: Tensor, lengths: Tensor) -> Tensor:
    """A copy of ``scores`` with every entry that does not count set to 0 (keeps padding finite)."""
    mask = factor_mask(lengths, scores.shape[1], scores.shape[-1])
    return torch.where(mask, scores, torch.zeros((), dtype=scores.dtype, device=scores.device))


def forward_lattice(scores: Tensor, lengths: Tensor) -> Tensor:
    """``alpha [B, pos, cur]``: log total weight of prefixes ending in ``cur`` at each position.

    ``scores`` must be cleaned. Past the end of a sentence alpha is carried unchanged, so
    ``alpha[:, -1]`` is the last real position's alpha.
    """
    alive = position_mask(lengths, scores.shape[1])
    alpha = [scores[:, 0, 0, :]]
    for i in range(1, scores.shape[1]):
        step = torch.logsumexp(alpha[-1].unsqueeze(-1) + scores[:, i], dim=-2)
        alpha.append(torch.where(alive[:, i, None], step, alpha[-1]))
    return torch.stack(alpha, dim=1)


def backward_lattice(scores: Tensor, lengths: Tensor) -> Tensor:
    """``beta [B, pos, prev]``: log total weight of the suffixes after tag ``prev`` at each position.

    ``scores`` must be cleaned; beta is 0 at the last real position and on padding.
    """
    alive = position_mask(lengths, scores.shape[1])
    zeros = scores.new_zeros(scores.shape[0], scores.shape[-1])
    beta = [zeros]
    for i in range(scores.shape[1] - 1, 0, -1):
        step = torch.logsumexp(scores[:, i] + beta[-1].unsqueeze(-2), dim=-1)
        beta.append(torch.where(alive[:, i, None], step, zeros))
    beta.reverse()
    return torch.stack(beta, dim=1)


def log_pairwise(scores: Tensor, alpha: Tensor, beta: Tensor, log_z: Tensor) -> Tensor:
    """``[B, pos, prev, cur]`` log pairwise marginals; meaningful only where ``factor_mask`` holds."""
    alpha_prev = torch.cat([torch.zeros_like(alpha[:, :1]), alpha[:, :-1]], dim=1)
    return alpha_prev.unsqueeze(-1) + scores + beta.unsqueeze(-2) - log_z[:, None, None, None]


class LinearChainCRF(Distribution):
    """Distribution over the tag sequences of a batch of sentences (see the module docstring).

    scores:  ``[B, pos, prev, cur]`` float; ``scores[:, 0, 0, :]`` are the start scores.
    lengths: ``[B]`` integer, positions per sentence, ``1 <= lengths <= T``.
    """

    arg_constraints: ClassVar[dict] = {}
    has_rsample = False

    def __init__(self, scores: Tensor, lengths: Tensor) -> None:
        check_chain(scores, lengths)
        self.scores = scores
        self.lengths = lengths
        self.num_states = scores.shape[-1]
        super().__init__(
            batch_shape=scores.shape[:1], event_shape=scores.shape[1:2], validate_args=False
        )

    @cached_property
    def mask(self) -> Tensor:
        """``[B, pos, prev, cur]`` True on the score entries that count."""
        return factor_mask(self.lengths, self.scores.shape[1], self.num_states)

    @cached_property
    def _clean(self) -> Tensor:
        return clean_scores(self.scores, self.lengths)

    @cached_property
    def _alpha(self) -> Tensor:
        return forward_lattice(self._clean, self.lengths)

    @cached_property
    def _beta(self) -> Tensor:
        return backward_lattice(self._clean, self.lengths)

    @cached_property
    def log_partition(self) -> Tensor:
        """``[B]`` log of the total weight of all tag sequences (forward algorithm)."""
        return torch.logsumexp(self._alpha[:, -1], dim=-1)

    @cached_property
    def marginals(self) -> Tensor:
        """``[B, pos, prev, cur]`` pairwise marginals p(y[i-1] = prev, y[i] = cur) by forward-backward;
        at position 0 only row 0 (the start state) is non-zero; exactly 0 on padding."""
        log_mu = log_pairwise(self._clean, self._alpha, self._beta, self.log_partition)
        return torch.where(self.mask, log_mu.exp(), torch.zeros_like(log_mu))

    @cached_property
    def unary_marginals(self) -> Tensor:
        """``[B, pos, cur]`` p(y[i] = cur); exactly 0 on padding."""
        return self.marginals.sum(dim=-2)

    def log_prob(self, tags: Tensor) -> Tensor:
        """``tags [..., B, pos]`` long (padding ignored) -> ``[..., B]`` log p(tags)."""
        batch, positions = self.scores.shape[:2]
        if tags.dim() < 2 or tuple(tags.shape[-2:]) != (batch, positions):
            raise ValueError(
                f"tags must be [..., {batch}, {positions}]; got shape {tuple(tags.shape)}"
            )
        alive = position_mask(self.lengths, positions)
        bad = alive & ((tags < 0) | (tags >= self.num_states))
        if bad.any():
            at = tuple(int(x) for x in bad.nonzero()[0])
            raise ValueError(
                f"tags{list(at)} = {int(tags[at])} is outside 0..{self.num_states - 1}"
            )
        tags = torch.where(alive, tags, torch.zeros_like(tags))
        prev = torch.cat([torch.zeros_like(tags[..., :1]), tags[..., :-1]], dim=-1)
        b = torch.arange(batch, device=tags.device)[:, None]
        i = torch.arange(positions, device=tags.device)
        picked = self._clean[b, i, prev, tags]
        return picked.sum(dim=-1) - self.log_partition

    def argmax(self) -> Tensor:
        """``[B, pos]`` long, the most probable tag sequence (Viterbi); 0 on padding.

        On the CPU, in compiled code (``viterbi_native.c``), else in numpy: the recursion is a
        loop over positions of a few tiny operations, where torch's per-call overhead was most of
        a tokenizer's decoding (a character per position). Both add and compare in the scores'
        own dtype and take the first maximum, as torch does, so the tags are the same (tests
        compare the three, and with enumeration)."""
        scores = self._clean.detach().cpu()
        if scores.dtype not in (torch.float32, torch.float64):  # half precision: numpy has no bfloat16
            scores = scores.double()
        scores, lengths = scores.numpy(), self.lengths.cpu().numpy()
        tags = native_viterbi(scores, lengths)
        if tags is None:
            tags = _viterbi(scores, lengths)
        return torch.from_numpy(tags).to(self.scores.device)

    def sample(self, n: int = 1, *, generator: torch.Generator | None = None) -> Tensor:  # type: ignore[override]
        """``[n, B, pos]`` long exact samples (backward filtering, forward sampling); 0 on padding."""
        if isinstance(n, torch.Size) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int; got {n!r}")
        scores, beta = self._clean.detach(), self._beta.detach()
        batch, positions = scores.shape[:2]
        alive = position_mask(self.lengths, positions)
        rows = torch.arange(batch, device=scores.device)
        # p(y[i] | y[i-1]) is proportional to exp(scores[i, y[i-1], y[i]] + beta[i, y[i]])
        logits = (scores[:, 0, 0, :] + beta[:, 0]).expand(n, -1, -1)
        tags = [_gumbel_argmax(logits, generator)]
        for i in range(1, positions):
            logits = scores[:, i][rows, tags[-1]] + beta[:, i].unsqueeze(0)
            step = _gumbel_argmax(logits, generator)
            tags.append(torch.where(alive[:, i], step, torch.zeros_like(step)))
        return torch.stack(tags, dim=-1)

    def entropy(self) -> Tensor:
        """``[B]`` Shannon entropy ``log Z - E[score]`` (differentiable; the autograd route)."""
        return self.log_partition - (self.marginals * self._clean).sum(dim=(1, 2, 3))

    def cross_entropy(self, other: LinearChainCRF) -> Tensor:
        """``[B]`` ``-E_self[log p_other]``."""
        self._check_other(other)
        return other.log_partition - (self.marginals * other._clean).sum(dim=(1, 2, 3))

    def kl(self, other: LinearChainCRF) -> Tensor:
        """``[B]`` KL(self || other)."""
        self._check_other(other)
        expected_gap = (self.marginals * (self._clean - other._clean)).sum(dim=(1, 2, 3))
        return other.log_partition - self.log_partition + expected_gap

    def expect(self, features: Tensor) -> Tensor:
        """``features [B, pos, prev, cur, F]`` -> ``[B, F]`` expected feature sums (first order)."""
        shape = tuple(self.scores.shape)
        if features.dim() != 5 or tuple(features.shape[:4]) != shape:
            raise ValueError(
                f"features must be [{', '.join(map(str, shape))}, F]; got {tuple(features.shape)}"
            )
        features = torch.where(self.mask.unsqueeze(-1), features, torch.zeros_like(features))
        return torch.einsum("bipc,bipcf->bf", self.marginals.to(features.dtype), features)

    def _check_other(self, other: LinearChainCRF) -> None:
        if not isinstance(other, LinearChainCRF):
            raise ValueError(f"other must be a LinearChainCRF; got {type(other).__name__}")  # noqa: TRY004
        if other.scores.shape != self.scores.shape or not torch.equal(other.lengths, self.lengths):
            raise ValueError(
                f"other must have the same scores shape and lengths; got {tuple(other.scores.shape)} "
                f"vs {tuple(self.scores.shape)}, lengths {other.lengths.tolist()} vs {self.lengths.tolist()}"
            )


def _gumbel_argmax(logits: Tensor, generator: torch.Generator | None) -> Tensor:
    """One exact draw per row of ``logits [..., S]`` (Gumbel-max), as ``[...]`` long."""
    uniform = torch.rand(
        logits.shape, generator=generator, dtype=torch.float64, device=logits.device
    )
    gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-300)))
    return (logits.to(torch.float64) + gumbel).argmax(dim=-1)


@register_kl(LinearChainCRF, LinearChainCRF)
def _kl_chain_chain(p: LinearChainCRF, q: LinearChainCRF) -> Tensor:
    return p.kl(q)


def _viterbi(scores: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``LinearChainCRF.argmax`` in numpy (where the compiled twin is not available)."""
    batch, positions, states = scores.shape[:3]
    pointers = np.empty((positions, batch, states), dtype=np.int64)
    identity = np.broadcast_to(np.arange(states), (batch, states))
    alive = (np.arange(positions)[:, None] < lengths)[:, :, None]  # [pos, B, 1]
    best = scores[:, 0, 0, :]
    for i in range(1, positions):
        candidates = best[:, :, None] + scores[:, i]  # [B, prev, cur]
        arg, step = candidates.argmax(axis=1), candidates.max(axis=1)
        if alive[i].all():
            pointers[i], best = arg, step
        else:  # identity pointers carry the last tag back through padding
            pointers[i] = np.where(alive[i], arg, identity)
            best = np.where(alive[i], step, best)
    tags = np.empty((batch, positions), dtype=np.int64)
    tags[:, -1] = best.argmax(axis=1)
    rows = np.arange(batch)
    for i in range(positions - 1, 0, -1):
        tags[:, i - 1] = pointers[i, rows, tags[:, i]]
    tags[np.arange(positions) >= lengths[:, None]] = 0
    return tags
