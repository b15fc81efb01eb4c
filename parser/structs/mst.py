"""Maximum spanning arborescence decoding (Chu-Liu/Edmonds with the root constraint).

Multi-root trees: Chu-Liu/Edmonds (Chu & Liu 1965; Edmonds 1967) with dense numpy contraction.
Single-root trees: the reweighting method of Stanojevic & Cohen (EMNLP 2021, "A root of a
problem"): subtracting from every root arc a constant larger than the spread of tree scores makes
the unconstrained optimum the best single-root tree; exact, and no extra decoding passes.

Decoding loops over sentences; each contraction is O(n^2) numpy work.
Ties are broken deterministically (the lowest index wins every argmax/argmin).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["maximum_spanning_tree"]


class NoTreeError(ValueError):
    """No spanning tree (with the requested root constraint) has a finite score."""


def maximum_spanning_tree(scores: Tensor, lengths: Tensor, *, single_root: bool) -> Tensor:
    """Highest-scoring dependency tree of each sentence.

    scores:  ``[B, dep, head]`` = ``[B, N+1, N+1]``, index 0 is ROOT; ``-inf`` forbids an arc.
    lengths: ``[B]`` number of words per sentence.
    single_root: exactly one word attaches to ROOT when True.

    Returns heads ``[B, N+1]`` long on the scores' device; ``heads[:, 0]`` and padding are 0.
    Raises ``NoTreeError`` (a ``ValueError``) when a sentence has no tree of finite score.
    """
    check_scores_and_lengths(scores, lengths)
    batch, size = scores.shape[0], scores.shape[1]
    weights = scores.detach().to("cpu", torch.float64).numpy()
    lengths_list = [int(length) for length in lengths.tolist()]
    heads = np.zeros((batch, size), dtype=np.int64)
    for b, n in enumerate(lengths_list):
        if n == 0:
            continue
        try:
            heads[b, : n + 1] = decode_sentence(
                weights[b, : n + 1, : n + 1], single_root=single_root
            )
        except NoTreeError as error:
            kind = "single-root " if single_root else ""
            raise NoTreeError(
                f"scores: no {kind}spanning tree with finite score exists for sentence {b} "
                f"(length {n}): {error}"
            ) from None
    return torch.from_numpy(heads).to(scores.device)


def check_scores_and_lengths(scores: Tensor, lengths: Tensor) -> None:
    """Shared input validation: shapes ``[B, N+1, N+1]`` and ``[B]``, no NaN or +inf scores."""
    if scores.dim() != 3 or scores.shape[1] != scores.shape[2]:
        raise ValueError(f"scores: expected shape [B, N+1, N+1], got {tuple(scores.shape)}")
    if not scores.is_floating_point():
        raise ValueError(f"scores: expected a floating dtype, got {scores.dtype}")
    if lengths.dim() != 1 or lengths.shape[0] != scores.shape[0]:
        raise ValueError(f"lengths: expected shape [{scores.shape[0]}], got {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths: expected an integer dtype, got {lengths.dtype}")
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > scores.shape[1] - 1):
        raise ValueError(
            f"lengths: values must lie in [0, {scores.shape[1] - 1}], got "
            f"min {int(lengths.min())}, max {int(lengths.max())}"
        )
    bad = torch.isnan(scores) | (scores == float("inf"))
    if bool(bad.any()):
        b, dep, head = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"scores: NaN or +inf at [b={b}, dep={dep}, head={head}] ({float(scores[b, dep, head])})"
        )


def decode_sentence(weights: np.ndarray, *, single_root: bool) -> np.ndarray:
    """``weights [n+1, n+1]`` (dep, head) of one sentence -> heads ``[n+1]`` (heads[0] = 0)."""
    w = np.array(weights, dtype=np.float64)  # own copy: root arcs get reweighted in place
    np.fill_diagonal(w, -np.inf)
    w[0, :] = -np.inf
    if single_root:
        # Every tree has at least one root arc; a penalty larger than any difference between two
        # trees' scores makes the best tree one with as few root arcs as possible (one, when a
        # single-root tree exists) and the best such tree (Stanojevic & Cohen 2021).
        finite = w[np.isfinite(w)]
        spread = float(finite.max() - finite.min()) if finite.size else 0.0
        w[1:, 0] -= (len(w) - 1) * spread + 1.0
    head = chu_liu_edmonds(w)
    if single_root and int((head[1:] == 0).sum()) > 1:
        raise NoTreeError("every tree with finite score has several root children")
    return head


def chu_liu_edmonds(w: np.ndarray) -> np.ndarray:
    """Maximum arborescence rooted at 0 of ``w [n+1, n+1]`` (dep, head; diagonal and row 0 -inf)."""
    records = []
    while True:
        size = w.shape[0]
        head = np.zeros(size, dtype=np.int64)
        head[1:] = w[1:].argmax(axis=1)
        missing = np.isneginf(w[np.arange(1, size), head[1:]])
        if missing.any():
            raise NoTreeError(
                f"(contracted) node {int(np.flatnonzero(missing)[0]) + 1} has no allowed head"
            )
        cycle = find_cycle(head)
        if cycle is None:
            break
        w, record = contract(w, head, cycle)
        records.append(record)
    for record in reversed(records):
        head = expand(head, record)
    head[0] = 0
    return head


def find_cycle(head: np.ndarray) -> np.ndarray | None:
    """First cycle of the greedy graph ``head [n+1]`` (node -> head), as node indices, or None."""
    heads = head.tolist()  # plain lists: this walk is pure Python
    state = [0] * len(heads)  # 0 new, 1 on the current path, 2 reaches the root
    state[0] = 2
    for start in range(1, len(heads)):
        path = []
        node = start
        while state[node] == 0:
            state[node] = 1
            path.append(node)
            node = heads[node]
        if state[node] == 1:
            return np.array(path[path.index(node) :], dtype=np.int64)
        for visited in path:
            state[visited] = 2
    return None


def contract(w: np.ndarray, head: np.ndarray, cycle: np.ndarray):
    """Contract ``cycle`` of the greedy graph into one node, placed last.

    Returns the contracted weights and what expansion needs: the kept nodes (old indices, root
    first), the cycle, the cycle's greedy heads, and for each kept node the cycle member entered
    from it (when it is the cycle's head) and the member it hangs from (when it is a dependent).
    """
    size = w.shape[0]
    in_cycle = np.zeros(size, dtype=bool)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)
    kept = len(rest)
    cycle_heads = head[cycle]
    # Entering the cycle at member d from head h breaks the cycle arc into d.
    gain = w[cycle][:, rest] - w[cycle, cycle_heads][:, None]  # [cycle dep, rest head]
    enter = gain.argmax(axis=0)
    out = w[rest][:, cycle]  # [rest dep, cycle head]
    leave = out.argmax(axis=1)
    contracted = np.full((kept + 1, kept + 1), -np.inf)
    contracted[:kept, :kept] = w[rest][:, rest]
    contracted[kept, :kept] = gain[enter, np.arange(kept)]
    contracted[:kept, kept] = out[np.arange(kept), leave]
    contracted[0, :] = -np.inf
    contracted[kept, kept] = -np.inf
    return contracted, (rest, cycle, cycle_heads, cycle[enter], cycle[leave])


def expand(head: np.ndarray, record) -> np.ndarray:
    """Undo one contraction: heads over the contracted graph -> heads over the graph before it."""
    rest, cycle, cycle_heads, enter_member, leave_member = record
    kept = len(rest)
    expanded = np.zeros(kept + len(cycle), dtype=np.int64)
    rest_heads = head[:kept]
    hangs_on_cycle = rest_heads == kept
    expanded[rest] = np.where(
        hangs_on_cycle, leave_member, rest[np.where(hangs_on_cycle, 0, rest_heads)]
    )
    expanded[cycle] = cycle_heads
    cycle_head = int(head[kept])
    expanded[enter_member[cycle_head]] = rest[cycle_head]
    return expanded
