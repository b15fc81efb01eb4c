"""A validated set of GE constraints bound to a UPOS vocabulary, vectorised into sparse arc
features for a batch.

For constraint ``k`` and sentence ``b`` the feature fires on arc ``(dep, head)`` when the child
``dep`` has a UPOS in ``child_k`` and the head satisfies the parent, direction and distance of the
constraint, or, for a ``rules`` constraint, when ``(UPOS of dep, UPOS of head or ROOT)`` is one of
its pairs. A constraint with a context (``after``) counts only the children whose preceding word
(position ``dep - 1``; never ROOT) has one of its ``after`` UPOS: the child mask is the UPOS table
AND that context, for both the firing arcs and the normaliser. The model value of the constraint is ``E[# firing arcs] / # words with a child UPOS``,
so ``counts[b, k]`` (that number of words) is its normaliser.

Feature columns: column ``k < K`` belongs to constraint ``k``. A ``direction: consistent``
constraint has no proportion of its own: its column ``k`` never fires (count 0), and it appends,
after the ``K`` constraint columns, a LEFT and a RIGHT column per child tag (one pair for all its
child tags when ``pooled``): the arcs from a word of that tag (or group) to a head satisfying
``parent``, ``distance`` and ``after`` that lies to the left, resp. right, each with that tag's
word count as its normaliser. ``consistency_columns`` lists the pairs.

A second-order constraint (``grandparent``) fires on arc pairs instead of arcs: the child's arc
``(dep, head)`` (satisfying parent, direction and distance) together with the head's own arc
``(head, g)``, ``g`` being ROOT (``grandparent: ROOT``: the head is the root word) or a word with a
grandparent UPOS; its expectation is a sum of pairwise marginals. ``position`` restricts the child
words (and so the normaliser) to the sentence's first or last word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from parser.constraints.spec import ROOT, Constraint, ConstraintSpecError


@dataclass(frozen=True)
class ConstraintFeatures:
    """Sparse constraint features of one batch, in the format of ``TreeCRF.expect_sparse``.

    arc_index:   ``[M, 3]`` long, rows ``(b, dep, head)`` of the arcs on which a feature fires.
    feature_ids: ``[M]`` long, the constraint index of each row.
    values:      ``[M]`` float, the feature value (1.0 for indicator constraints).
    n_features:  number of feature columns ``F`` (``K`` plus two per consistency group).
    counts:      ``[B, F]`` float, words of each sentence whose UPOS is a child UPOS of column ``k``.
    pair_first, pair_second: ``[P, 3]`` long, the arc pairs ``(b, dep, head)``, ``(b, head, g)`` of
                 second-order constraints (``TreeCRF.arc_pair_marginals``); ``[0, 3]`` when none.
    pair_feature_ids: ``[P]`` long, the constraint index of each pair.
    """

    arc_index: Tensor
    feature_ids: Tensor
    values: Tensor
    n_features: int
    counts: Tensor
    pair_first: Tensor
    pair_second: Tensor
    pair_feature_ids: Tensor

    @property
    def has_pairs(self) -> bool:
        return self.pair_first.shape[0] > 0


class ConstraintSet:
    """Constraints bound to the UPOS id -> name list of a vocabulary.

    Tags of the spec that the vocabulary lacks are kept: such a constraint never fires and its
    normaliser is 0 (objectives skip constraints with no child word). UD v1's ``CONJ`` is
    deliberately NOT read as the spec's ``CCONJ``: the sets encode v2 guidelines (cc attaches to
    the following conjunct), and a v1 treebank's trees follow v1's (cc on the first conjunct).
    """

    def __init__(
        self, constraints: Sequence[Constraint], upos_names: Sequence[str], *, source: str = "<spec>"
    ) -> None:
        if not constraints:
            raise ConstraintSpecError(f"{source}: a constraint set needs at least one constraint")
        self.constraints = tuple(constraints)
        self.upos_names = tuple(upos_names)
        self.source = source
        ids = {name: i for i, name in enumerate(self.upos_names)}
        vocab_size = max(len(self.upos_names), 1)

        def table(tags: Sequence[str] | None) -> Tensor:
            # [V] bool: which UPOS ids belong to ``tags`` (all ids when tags is None).
            if tags is None:
                return torch.ones(vocab_size, dtype=torch.bool)
            row = torch.zeros(vocab_size, dtype=torch.bool)
            for tag in tags:
                if tag in ids:
                    row[ids[tag]] = True
            return row

        # Feature columns: one per constraint (a consistent constraint's own column gets no child
        # tag, so it never fires and counts 0), then a (left, right) pair per consistency group.
        columns = [replace(c, child=()) if c.consistent else c for c in self.constraints]
        pairs_of_columns, owners = [], []
        for k, c in enumerate(self.constraints):
            if not c.consistent:
                continue
            for group in [c.child] if c.pooled else [(tag,) for tag in c.child]:
                pairs_of_columns.append((len(columns), len(columns) + 1))
                owners.append(k)
                columns += [replace(c, child=group, direction="left"), replace(c, child=group, direction="right")]
        self._columns = tuple(columns)
        self._consistency = torch.tensor(pairs_of_columns, dtype=torch.long).view(-1, 2)  # [G, 2]
        self._consistency_owner = torch.tensor(owners, dtype=torch.long)  # [G]
        self._child = torch.stack([table(c.child) for c in self._columns])  # [F, V]
        # The UPOS the word before the child must have (all ids when there is no context).
        self._after = torch.stack([table(c.after) for c in self._columns])  # [F, V]
        self._has_context = torch.tensor([c.after is not None for c in self._columns])  # [F]
        # Which (child UPOS, head UPOS) pairs fire, and which child UPOS fire on ROOT: the
        # product of child and parent tags, or a rules constraint's listed pairs.
        pairs, roots = [], []
        for c, child in zip(self._columns, self._child):
            if c.rules is not None:
                pair = torch.zeros(vocab_size, vocab_size, dtype=torch.bool)
                root = torch.zeros(vocab_size, dtype=torch.bool)
                for dep, head in c.rules:
                    if dep not in ids:
                        continue
                    if head == ROOT:
                        root[ids[dep]] = True
                    elif head in ids:
                        pair[ids[dep], ids[head]] = True
            elif c.to_root:
                pair, root = torch.zeros(vocab_size, vocab_size, dtype=torch.bool), child.clone()
            else:
                pair = child[:, None] & table(c.parent)[None, :]
                root = torch.zeros(vocab_size, dtype=torch.bool)
            pairs.append(pair)
            roots.append(root)
        self._pairs = torch.stack(pairs)  # [F, V(child), V(head)]
        self._roots = torch.stack(roots)  # [F, V(child)]
        # Second order: which columns, and what the head's head must be (ROOT, or a UPOS table).
        self._second = torch.tensor([c.second_order for c in self._columns])  # [F]
        self._grand_root = torch.tensor([c.second_order and ROOT in c.grandparent for c in self._columns])
        self._grand = torch.stack([table(tuple(t for t in c.grandparent if t != ROOT)) if c.second_order
                                   else torch.zeros(vocab_size, dtype=torch.bool) for c in self._columns])
        # Position restriction of the child: 0 any, 1 first word, 2 last word.
        self._position = torch.tensor([("any", "first", "last").index(c.position) for c in self._columns])
        self._lower = torch.tensor([c.bound == "lower" for c in self.constraints])  # [K]
        self._upper = torch.tensor([c.bound == "upper" for c in self.constraints])  # [K]

    def __len__(self) -> int:
        return len(self.constraints)

    def __repr__(self) -> str:
        return f"ConstraintSet({len(self)} constraints from {self.source})"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.constraints]

    @property
    def n_columns(self) -> int:
        """Feature columns ``F``: ``K`` plus two per consistency group."""
        return len(self._columns)

    @property
    def targets(self) -> Tensor:
        """``[K]`` float64 target proportions (NaN for a ``consistent`` constraint: it has none)."""
        return torch.tensor(
            [float("nan") if c.target is None else c.target for c in self.constraints], dtype=torch.float64
        )

    @property
    def proportions_mask(self) -> Tensor:
        """``[F]`` bool: the columns compared with a target (the non-consistent constraints)."""
        mask = torch.zeros(self.n_columns, dtype=torch.bool)
        mask[: len(self)] = torch.tensor([not c.consistent for c in self.constraints])
        return mask

    @property
    def column_targets(self) -> Tensor:
        """``[F]`` float64: each proportion column's target, 0 elsewhere (never used there)."""
        targets = torch.zeros(self.n_columns, dtype=torch.float64)
        targets[: len(self)] = torch.nan_to_num(self.targets, nan=0.0)
        return targets

    @property
    def column_weights(self) -> Tensor:
        """``[F]`` float64: the factor on each proportion column's divergence (its constraint's
        ``weight``: 1 for a written constraint, a confidence for an estimated one), 0 elsewhere."""
        weights = torch.zeros(self.n_columns, dtype=torch.float64)
        weights[: len(self)] = torch.tensor([c.weight for c in self.constraints], dtype=torch.float64)
        return weights

    @property
    def consistency_columns(self) -> Tensor:
        """``[G, 2]`` long: the (left, right) feature columns of each consistency group (a child
        tag of a ``consistent`` constraint, or all its tags when pooled)."""
        return self._consistency.clone()

    @property
    def consistency_owners(self) -> Tensor:
        """``[G]`` long: the constraint each consistency group belongs to."""
        return self._consistency_owner.clone()

    @property
    def consistency_weights(self) -> Tensor:
        """``[G]`` float64: the ``weight`` of each consistency group's constraint."""
        weights = torch.tensor([c.weight for c in self.constraints], dtype=torch.float64)
        return weights[self._consistency_owner]

    @property
    def bounds(self) -> tuple[Tensor, Tensor]:
        """``([K] bool lower, [K] bool upper)``: one-sided constraints (neither: equality)."""
        return self._lower.clone(), self._upper.clone()

    @property
    def column_bounds(self) -> tuple[Tensor, Tensor]:
        """``([F] bool lower, [F] bool upper)``: ``bounds`` over the feature columns (False past
        the ``K`` constraint columns)."""
        lower = torch.zeros(self.n_columns, dtype=torch.bool)
        upper = torch.zeros(self.n_columns, dtype=torch.bool)
        lower[: len(self)], upper[: len(self)] = self._lower, self._upper
        return lower, upper

    def children(self, upos: Tensor, lengths: Tensor) -> Tensor:
        """``[F, B, N+1]`` bool: the words each feature column constrains (its normaliser's
        words): a child UPOS of the column, and its context (``after``) and ``position``.
        ``upos`` and ``lengths`` as in :meth:`features` (which checks them)."""
        device = upos.device
        positions = torch.arange(upos.shape[1], device=device)
        is_word = (positions > 0) & (positions <= lengths[:, None])  # [B, N+1]
        child = self._child.to(device)[:, upos] & is_word  # [F, B, N+1]
        if bool(self._has_context.any()):
            # Context: the preceding word's UPOS (position p-1); word 1 follows ROOT, so a
            # constraint with a context never counts it.
            before = self._after.to(device)[:, upos[:, :-1]] & is_word[:, :-1]  # [F, B, N]
            context = torch.cat([torch.zeros_like(before[..., :1]), before], dim=-1)  # [F, B, N+1]
            child = child & (context | ~self._has_context.to(device)[:, None, None])
        if bool((self._position > 0).any()):
            where = self._position.to(device)[:, None, None]
            first = positions[None, :] == 1
            last = positions[None, :] == lengths[:, None]  # [B, N+1]
            child = child & ((where == 0) | ((where == 1) & first) | ((where == 2) & last))
        return child

    def features(self, upos: Tensor, lengths: Tensor) -> ConstraintFeatures:
        """Vectorise the constraints for a batch.

        upos:    ``[B, N+1]`` UPOS ids (position 0 is ROOT and is never a child).
        lengths: ``[B]`` words per sentence.
        """
        if upos.dim() != 2 or lengths.dim() != 1 or upos.shape[0] != lengths.shape[0]:
            raise ValueError(
                f"upos must be [B, N+1] and lengths [B]; got {tuple(upos.shape)} and {tuple(lengths.shape)}"
            )
        if bool((lengths > upos.shape[1] - 1).any()) or bool((lengths < 0).any()):
            raise ValueError(f"lengths {lengths.tolist()} do not fit upos of width {upos.shape[1]}")
        if upos.numel() and (int(upos.min()) < 0 or int(upos.max()) >= self._child.shape[1]):
            raise ValueError(
                f"upos ids must lie in [0, {self._child.shape[1]}) (the UPOS vocabulary of "
                f"{self.source}); got range [{int(upos.min())}, {int(upos.max())}]"
            )
        device = upos.device
        size = upos.shape[1]
        positions = torch.arange(size, device=device)
        is_word = (positions > 0) & (positions <= lengths[:, None])  # [B, N+1]
        child = self.children(upos, lengths)  # [F, B, N+1]
        pair = self._pairs.to(device)[:, upos[:, :, None], upos[:, None, :]]  # [F, B, dep, head]
        root = self._roots.to(device)[:, upos] & child  # [F, B, dep]
        offset = positions[None, :] - positions[:, None]  # [dep, head]: head - dep
        geometry = torch.stack([_geometry(offset, c) for c in self._columns])  # [F, dep, head]
        # Word heads by the pair table and geometry; the ROOT column (head 0) by the root table.
        to_word = pair & (is_word[:, None, :] & child[..., None]) & geometry[:, None]
        fires = torch.cat([root[..., None], to_word[..., 1:]], dim=-1)  # [F, B, dep, head]
        second = self._second.to(device)
        pair_first, pair_second, pair_ids = self._pairs_of(fires & second[:, None, None, None], upos, is_word)
        index = (fires & ~second[:, None, None, None]).nonzero()  # k-major, as one row block per constraint
        arc_index = index[:, 1:]
        feature_ids = index[:, 0]
        return ConstraintFeatures(
            arc_index=arc_index,
            feature_ids=feature_ids,
            values=torch.ones(arc_index.shape[0], device=device),
            n_features=self.n_columns,
            counts=child.sum(-1).transpose(0, 1).to(torch.get_default_dtype()),
            pair_first=pair_first,
            pair_second=pair_second,
            pair_feature_ids=pair_ids,
        )

    def _pairs_of(self, fires: Tensor, upos: Tensor, is_word: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Arc pairs of the second-order columns: each firing child arc ``(b, dep, head)`` with every
        arc ``(b, head, g)`` whose ``g`` satisfies the column's grandparent (``g = dep`` is left out:
        a two-cycle has probability 0)."""
        device = upos.device
        arcs = fires.nonzero()  # [M, 4] rows (k, b, dep, head); heads are words (parent is not ROOT)
        if not arcs.shape[0]:
            empty = torch.zeros(0, 3, dtype=torch.long, device=device)
            return empty, empty.clone(), torch.zeros(0, dtype=torch.long, device=device)
        k, b, dep, head = arcs.unbind(1)
        grand = self._grand.to(device)[k[:, None], upos[b]] & is_word[b]  # [M, N+1] word grandparents
        grand[:, 0] = self._grand_root.to(device)[k]
        nodes = torch.arange(upos.shape[1], device=device)
        grand &= (nodes[None, :] != head[:, None]) & (nodes[None, :] != dep[:, None])
        row, g = grand.nonzero().unbind(1)
        first = torch.stack([b[row], dep[row], head[row]], 1)
        second = torch.stack([b[row], head[row], g], 1)
        return first, second, k[row]


def _geometry(offset: Tensor, constraint: Constraint) -> Tensor:
    """``[dep, head]`` bool: direction and distance of the constraint (self-loops excluded)."""
    ok = offset != 0
    if constraint.direction == "left":
        ok = ok & (offset < 0)
    elif constraint.direction == "right":
        ok = ok & (offset > 0)
    if constraint.distance is not None:
        low, high = constraint.distance
        ok = ok & (offset.abs() >= low)
        if high is not None:
            ok = ok & (offset.abs() <= high)
    return ok
