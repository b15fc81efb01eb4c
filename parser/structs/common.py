"""What every structure shares: the one input check, arc and word masks, log-space helpers.

Conventions: ``scores[b, dep, head]`` ``[B, N+1, N+1]`` (index 0 = ROOT; labeled distributions
also take ``[B, N+1, N+1, L]``), ``lengths[b]`` counts the words of sentence ``b``.

Length rule (every tree structure): each sentence has ``1..N`` words; a length of 0 or above N is
a ``ValueError`` naming ``lengths[b]``. An empty batch (``B = 0``) is not an error.
"""

from __future__ import annotations

from functools import lru_cache

import torch
from torch import Tensor

__all__ = [
    "NEG_INF", "arc_mask", "as_dtype", "cached", "check_comparable", "check_scores_and_lengths", "extreme", "logaddexp_safe",
    "logsumexp_safe", "numpy_ready", "off_arc_mask", "off_arc_penalty", "positions", "rounding_cleared",
    "sparse_expectation", "word_mask",
]

NEG_INF = float("-inf")


class cached:  # (lower case: used as a decorator, like functools.cached_property)
    """``functools.cached_property`` without its lock: Python 3.11 takes one on every first
    access, a per-call cost for these one-shot objects. Not thread-safe (nor are tensors)."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


# ----------------------------------------------------------------- the input check
def check_scores_and_lengths(scores: Tensor, lengths: Tensor, *,
                             labeled: bool = False) -> tuple[Tensor, bool, float]:
    """Raises ValueError on bad input (shapes ``[B, N+1, N+1]`` (``labeled``: or ``[B, N+1, N+1,
    L]``) and ``[B]``, a float ``scores``, integer ``lengths`` in ``1..N``, no NaN or +inf score
    on a real arc). Returns ``(scores, padded, highest)``: the scores to compute with (the input
    itself, or, when an ignored entry (row 0, the diagonal, padding) is NaN or +inf, a copy with
    0 there, so that no arithmetic meets it), whether any sentence is shorter than N, and the
    largest score."""
    if not isinstance(scores, Tensor) or not scores.is_floating_point():
        raise ValueError(f"scores: expected a float tensor, got {getattr(scores, 'dtype', scores)}")
    dims = (3, 4) if labeled else (3,)
    if scores.dim() not in dims or scores.shape[1] != scores.shape[2] or scores.shape[1] < 1:
        wanted = "[B, N+1, N+1] or [B, N+1, N+1, L]" if labeled else "[B, N+1, N+1]"
        raise ValueError(f"scores: expected shape {wanted}, got {tuple(scores.shape)}")
    if (not isinstance(lengths, Tensor) or lengths.dim() != 1 or lengths.dtype.is_floating_point
            or lengths.dtype == torch.bool):
        raise ValueError(f"lengths: expected an integer [B] tensor, got {lengths!r}")
    if lengths.shape[0] != scores.shape[0]:
        raise ValueError(f"lengths: {lengths.shape[0]} sentences, scores has {scores.shape[0]}")
    size = scores.shape[1]
    low = size - 1
    if lengths.numel():
        values = lengths.tolist()  # one sync, then plain Python (cheaper than aminmax + 2 items)
        low, high = min(values), max(values)
        if low < 1 or high > size - 1:
            bad = int(((lengths < 1) | (lengths > size - 1)).nonzero()[0, 0])
            raise ValueError(f"lengths[{bad}] = {int(lengths[bad])} outside 1..N = 1..{size - 1} "
                             f"(scores {tuple(scores.shape)})")
    # The maximum is NaN or +inf exactly when a score is (then, and only then, a closer look).
    highest = extreme(scores, "max")
    if not highest < float("inf"):
        scores, highest = _ignored_cleared(scores, lengths.to(scores.device))
    return scores, low < size - 1, highest


def _ignored_cleared(scores: Tensor, lengths: Tensor) -> tuple[Tensor, float]:
    """``(scores with 0 on ignored entries, largest score)``; ValueError naming the first NaN or
    +inf on a real arc."""
    real = arc_mask(lengths, scores.shape[1])
    real = real[..., None].expand(scores.shape) if scores.dim() == 4 else real
    bad = (torch.isnan(scores) | torch.isposinf(scores)) & real
    if bool(bad.any()):
        where = tuple(int(i) for i in bad.nonzero()[0])
        named = ", ".join(f"{k}={i}" for k, i in zip(("b", "dep", "head", "label"), where))
        raise ValueError(f"scores{list(where)} = {scores[where].item()}: NaN or +inf score ({named})")
    scores = scores.masked_fill(~real, 0.0)
    return scores, extreme(scores, "max")


def as_dtype(tensor: Tensor, dtype: torch.dtype) -> Tensor:
    """``tensor.to(dtype)`` without the call when it already has it (per-call overhead)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


def numpy_ready(scores: Tensor) -> bool:
    """CPU float32/float64: ``scores.numpy()`` is a free view (one-sentence path, input check)."""
    return scores.device.type == "cpu" and scores.dtype in (torch.float32, torch.float64)


def extreme(scores: Tensor, which: str) -> float:
    """The largest (``which="max"``) or smallest (``"min"``) score (NaN if one is; 0 without
    scores), by numpy where it can view the tensor: in a one-sentence call a torch op costs
    several times its isolated time."""
    if not scores.numel():
        return 0.0
    scores = scores.detach() if scores.requires_grad else scores
    if numpy_ready(scores):
        return float(getattr(scores.numpy(), which)())
    return float(getattr(torch, "a" + which)(scores))


# ----------------------------------------------------------------- masks
class _MaskStorage:
    """Positions and unpadded arc tables for every size up to ``capacity``, one allocation."""

    def __init__(self, capacity: int, device: torch.device) -> None:
        self.capacity = capacity
        self.positions = torch.arange(capacity, device=device)
        arcs = ~torch.eye(capacity, dtype=torch.bool, device=device)
        arcs[0] = False
        self.arcs = arcs
        # The last word an arc (dep, head) needs, max(dep, head); beyond any length off arcs.
        reach = torch.maximum(self.positions[:, None], self.positions[None, :])
        self.reach = reach.masked_fill(~arcs, capacity)


_MASK_STORAGE: dict[torch.device, _MaskStorage] = {}


@lru_cache(maxsize=1024)
def _tables(size: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """``(positions [S], arcs [S, S], reach [S, S])``: views into the device's storage (top-left
    blocks, so caching every size costs no memory per size); never written to."""
    # (normal tensors even when first asked for under inference_mode: a later graph saves them)
    with torch.inference_mode(False):
        big = _MASK_STORAGE.get(device)
        if big is None or big.capacity < size:  # grows by doubling; old views stay valid
            big = _MASK_STORAGE[device] = _MaskStorage(max(size, 64, 2 * big.capacity if big else 0), device)
        return (big.positions.narrow(0, 0, size), big.arcs.narrow(0, 0, size).narrow(1, 0, size),
                big.reach.narrow(0, 0, size).narrow(1, 0, size))


def positions(size: int, device: torch.device) -> Tensor:
    """``[S]`` long ``0..S-1`` (cached; never write to it)."""
    return _tables(size, device)[0]


@lru_cache(maxsize=1024)
def off_arc_penalty(size: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """``[S, S]``: 0 on the arcs of an unpadded sentence, -inf off them (row 0, diagonal)."""
    arcs = _tables(size, device)[1]
    with torch.inference_mode(False):  # (cached: see _tables)
        return torch.zeros(size, size, dtype=dtype, device=device).masked_fill(~arcs, NEG_INF)


def off_arc_mask(lengths: Tensor, size: int) -> Tensor:
    """``[B, dep, head]`` bool: ``~arc_mask`` in one comparison."""
    return _tables(size, lengths.device)[2] > lengths.view(-1, 1, 1)


def word_mask(lengths: Tensor, size: int) -> Tensor:
    """``[B, N+1]`` True on real words (positions ``1..lengths[b]``)."""
    where = _tables(size, lengths.device)[0]
    return (where > 0) & (where <= lengths[:, None])


def arc_mask(lengths: Tensor, size: int, *, padded: bool = True) -> Tensor:
    """``[B, dep, head]`` bool: real arcs (word dependent; ROOT or another word as head).

    ``padded=False`` promises ``lengths == size - 1`` everywhere: a broadcast cached mask.
    """
    _, arcs, reach = _tables(size, lengths.device)
    if not padded:
        return arcs.expand(lengths.shape[0], size, size)
    return reach <= lengths[:, None, None]  # one broadcast comparison


# ----------------------------------------------------------------- log space and expectations
def logsumexp_safe(x: Tensor, dim: int) -> Tensor:
    """``logsumexp`` whose value is ``-inf`` and gradient 0 (not NaN) where all inputs are -inf."""
    shift = x.detach().amax(dim, keepdim=True)  # exact to treat as constant: any shift works
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    total = torch.exp(x - shift).sum(dim)
    positive = total > 0
    logged = torch.log(torch.where(positive, total, torch.ones_like(total)))
    return torch.where(positive, logged + shift.squeeze(dim), torch.full_like(logged, NEG_INF))


def logaddexp_safe(a: Tensor, b: Tensor) -> Tensor:
    """Elementwise ``log(exp(a) + exp(b))`` with -inf handled like :func:`logsumexp_safe`."""
    shift = torch.maximum(a, b).detach()
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    total = torch.exp(a - shift) + torch.exp(b - shift)
    positive = total > 0
    logged = torch.log(torch.where(positive, total, torch.ones_like(total)))
    return torch.where(positive, logged + shift, torch.full_like(logged, NEG_INF))


def check_comparable(mine, other, kind: type) -> None:
    """Raise ``ValueError`` unless ``other`` is a ``kind`` over the same sentences as ``mine`` (score
    shape, lengths, single_root): what a KL or cross-entropy between two distributions needs."""
    if not isinstance(other, kind):
        raise ValueError(f"other: expected a {kind.__name__}, got {type(other).__name__}")  # noqa: TRY004
    if (other.scores.shape != mine.scores.shape or other.single_root != mine.single_root
            or not torch.equal(other.lengths, mine.lengths)):
        raise ValueError(f"other: scores {list(other.scores.shape)} single_root={other.single_root} "
                         f"do not match {list(mine.scores.shape)} single_root={mine.single_root} "
                         "(or lengths differ)")


def rounding_cleared(value: Tensor, rounding: Tensor, *, upper: bool = False) -> Tensor:
    """``value`` (float64) with 0 where it lies on the wrong side of 0 (above it when ``upper``,
    else below) by at most ``rounding``: for a quantity whose exact value provably lies on the
    right side (entropy, KL, cross-entropy >= 0; a log-probability <= 0), such a violation is the
    rounding of the float64 sums that form it. A larger violation is left as it is (a bug to
    see, not to hide). The gradient is the unclamped one (the clamp is a constant shift)."""
    wrong = value > 0 if upper else value < 0
    excess = torch.where(wrong & (value.abs() <= rounding), value, torch.zeros_like(value))
    return value - excess.detach()


def sparse_expectation(marginals: Tensor, arc_index: Tensor, feature_ids: Tensor, values: Tensor,
                       n_features: int) -> Tensor:
    """``[B, n_features]``: the marginals at ``arc_index`` rows (``(b, dep, head[, label])``) times
    ``values``, summed per sentence and feature (shared by the tree distributions)."""
    probs = marginals[tuple(arc_index.t())]
    out = torch.zeros(marginals.shape[0], n_features, dtype=values.dtype, device=values.device)
    flat = arc_index[:, 0] * n_features + feature_ids
    return out.reshape(-1).index_add(0, flat, probs.to(values.dtype) * values).reshape(out.shape)
