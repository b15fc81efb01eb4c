"""Attach punctuation without crossing arcs, choosing among the allowed heads by the scores.

The UD validator requires punctuation to be projective (``punct-is-nonproj``: every word between
a mark and its head lies in the head's subtree) and not to make other arcs non-projective
(``punct-causes-nonproj``: a mark inside an arc's span lies in that arc head's subtree). With the
other words' tree fixed and the marks as leaves, both are conditions on the mark's head ``h``
alone:

1. every other word strictly between ``h`` and the mark descends from ``h`` (or is ``h``);
2. for every arc over the mark, ``h`` descends from that arc's head (or is it).

Each mark takes its highest-scoring head among the words that meet both (never ROOT: a mark is
not the root word). A mark with no such head (it lies in the gap of two crossing arcs of the other
words) keeps its decoded head. Unlike :mod:`.unit_attachment`, which puts every mark at one
position fixed by the guidelines, the scores choose among all the positions the validator allows.
Marks are checked against the other words only: two marks can still cross each other.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parser.structs.decoding.native import check_punct_inputs, native_punct
from parser.structs.decoding.unit_attachment import lift_children

__all__ = ["attach_punct_projectively"]


def attach_punct_projectively(heads: Tensor, lengths: Tensor, marked: Tensor, scores: Tensor, *,
                              native: bool = True) -> tuple[Tensor, Tensor]:
    """``(heads [B, N+1], stuck [B])``: the words where ``marked [B, N+1]`` is True become leaves
    attached by the conditions above, each to its best allowed head by ``scores [B, dep, head]``;
    ``stuck``: the sentences where some mark had no allowed head (it keeps its decoded head). A
    projective tree of the other words always allows one (the guidelines' head,
    :mod:`.unit_attachment`), so a caller can decode those sentences projectively instead.

    heads: decoded trees (``heads[:, 0]`` and padding ignored, each word's head in ``0..N``);
    lengths: ``[B]`` words in ``0..N``; ValueError naming the tensor otherwise. A sentence whose root
    word is marked, or with no unmarked word, is left as decoded.

    native: CPU tensors go to the compiled twin where it is available
    (:mod:`parser.structs.decoding.native`, the same heads); False: this module's torch code.
    """
    check_punct_inputs(heads, lengths, marked, scores)
    found = native_punct(heads, lengths, marked, scores) if native else None
    if found is not None:
        return found
    size = heads.shape[1]
    positions = torch.arange(size, device=heads.device)
    words = (positions[None, :] >= 1) & (positions[None, :] <= lengths[:, None])
    marked = marked & words
    content = words & ~marked
    root_word = torch.where(words & (heads == 0), positions[None, :], torch.zeros_like(heads)).amax(1)
    keeps = marked.gather(1, root_word[:, None]).squeeze(1) | ~content.any(1)
    marked = marked & ~keeps[:, None]
    tree = lift_children(heads, marked, words)  # the other words' tree, marks' children lifted
    below = _descends(tree, content)  # below[b, x, y]: x is y or descends from y
    placed = content.clone()  # the words whose arcs the next mark must respect
    stuck = torch.zeros_like(keeps)
    # Marks left to right, one per sentence per step: each placed mark is a leaf the next ones
    # respect like any other word (so that marks do not cross each other either).
    rank = marked.cumsum(1).masked_fill(~marked, 0)  # k-th mark of its sentence at rank k
    for k in range(1, int(rank.max()) + 1 if marked.any() else 1):
        at = rank == k  # [B, N+1]: this step's mark, if any
        active = at.any(1)
        p = at.to(torch.long).argmax(1)  # [B] its position
        low = torch.minimum(positions[None, :], p[:, None])  # [B, h]
        high = torch.maximum(positions[None, :], p[:, None])
        # 1. Placed words strictly between h and p descend from h.
        between = (low[:, :, None] < positions) & (positions < high[:, :, None])  # [B, h, x]
        strays = between & placed[:, None, :] & ~below.transpose(1, 2)
        # 2. Placed arcs (head(x) -> x) over p: h descends from head(x).
        arc_low = torch.minimum(positions[None, :], tree)
        arc_high = torch.maximum(positions[None, :], tree)
        over = placed & (arc_low < p[:, None]) & (p[:, None] < arc_high)  # [B, x]
        under = below.gather(2, tree.clamp(min=0)[:, None, :].expand(-1, size, -1)) | (tree[:, None, :] == 0)
        blocked = over[:, None, :] & ~under  # [B, h, x]
        allowed = ~strays.any(-1) & ~blocked.any(-1) & content  # heads are other (content) words
        row = scores.gather(1, p[:, None, None].expand(-1, 1, size)).squeeze(1)  # [B, h]
        best = row.masked_fill(~allowed, float("-inf")).argmax(-1)
        found = allowed.any(-1)
        head = torch.where(found, best, heads.gather(1, p[:, None]).squeeze(1))
        stuck |= active & ~found
        tree = torch.where(at, head[:, None], tree)
        placed |= at
        # The mark descends from what its head descends from (a leaf: nothing else changes).
        below = torch.where(at[:, :, None], below.gather(1, head[:, None, None].expand(-1, 1, size))
                            | (positions == p[:, None])[:, None, :], below)
    return torch.where(keeps[:, None], heads, tree), stuck


def _descends(tree: Tensor, content: Tensor) -> Tensor:
    """``[B, x, y]`` bool: word ``x`` is ``y`` or descends from ``y`` in ``tree`` (content words;
    the transitive closure by repeated squaring, O(N^3 log N))."""
    size = tree.shape[1]
    eye = torch.eye(size, dtype=torch.bool, device=tree.device)
    parent = torch.zeros(tree.shape[0], size, size, dtype=torch.bool, device=tree.device)
    parent.scatter_(2, tree.clamp(min=0)[..., None], content[..., None])
    reach = parent | eye
    for _ in range(max(1, (size - 1).bit_length())):
        reach = reach | (reach.to(torch.float32) @ reach.to(torch.float32) > 0)
    return reach & content[:, :, None] | eye
