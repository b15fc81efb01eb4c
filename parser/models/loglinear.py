"""A log-linear edge scorer over hashed McDonald et al. (2005) first-order features."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from parser.data.batch import Batch
from parser.data.vocab import N_SPECIAL, UNK
from parser.models.checks import check_batch
from parser.models.edge_scores import EdgeScores
from parser.models.features import (
    ARC_TEMPLATES,
    BETWEEN_TEMPLATE,
    DISTANCE_TEMPLATE,
    N_DISTANCE_BINS,
    UNLEXICALIZED,
    arc_sources,
    between_counts,
    direction_and_distance,
    hash_extend,
    hash_values,
)
from parser.models.layers import dropped_words

# Label templates, each conjoined with the relation: bias, (hp), (dp), (hp, dp),
# (hp, dp, direction), (direction, distance), (hw), (dw).
LABEL_BIAS, LABEL_HP, LABEL_DP, LABEL_PAIR, LABEL_PAIR_DIR, LABEL_DIST, LABEL_HW, LABEL_DW = range(
    8
)


class LogLinearScorer(nn.Module):
    """Arc score = sum of the weights of the arc's features; every template in
    ``features.ARC_TEMPLATES`` fires once plain and once conjoined with direction and distance;
    the in-between template fires once per word between head and dependent (weighted by counts).

    Weights live in hashed tables (``n_buckets`` for arcs, ``n_label_buckets`` for labels), zero
    at the start. ``sparse=True`` gives sparse gradients (then use a sparse optimiser). Rare words
    mapped to UNK by the vocabulary share the UNK word features, so their POS features carry them.
    Labels ``[B, dep, head, L]`` come from a smaller set (see ``LABEL_*``) scored through small
    per-relation tables, so no ``[B, N+1, N+1, L]`` id tensor is ever built.

    ``word_dropout``: in training, each word is read as UNK (word id ``UNK``, characters one
    ``UNK``) with this probability, so its word, prefix and suffix features are all replaced by
    the unknown word's; the POS and unknown-word features then learn to carry arcs on their own
    (Sutton et al.'s weight undertraining: rare lexical features otherwise explain the training
    trees alone).

    ``lexical=False`` keeps only the templates made of UPOS tags (``features.UNLEXICALIZED``), the
    in-between template and a bare direction x distance template (``DISTANCE_TEMPLATE``): no word,
    prefix or suffix feature (nor the label scores' word features), so every weight is shared by
    all arcs with the same tags and context, and no score changes when the words do. For training without trees (GE),
    where the constraints speak about tags and distances only.

    ``distance_prior`` (``s >= 0``) adds the fixed score ``-s * log|dep - head|`` to every arc
    between two words (ROOT arcs get 0): with zero weights the model starts as the harmonic
    distribution ``p(head) ~ |dep - head|^-s`` (Klein & Manning's harmonic initialiser for the
    DMV; short dependencies are the cross-linguistic norm, Futrell et al. 2015). It is a constant,
    not a weight: the direction/distance features can learn to undo it where the data disagree.

    ``distance_prior_exempt`` (UPOS ids) leaves the prior off every arc whose DEPENDENT carries one
    of these tags (its arcs then score 0 from the prior, at any distance). Meant for punctuation:
    by convention (UD u/dep/punct) a mark attaches to the head of its clause, often far away (the
    sentence-final mark to the root word), so dependency-length minimisation does not describe
    it, and the prior pulls it to the nearest word. The ids are fixed by the vocabulary (the
    trainer maps tag names to ids when it builds the scorer); they are a constant, not a weight.
    """

    def __init__(
        self,
        *,
        n_words: int,
        n_upos: int,
        n_rels: int,
        n_buckets: int = 2**22,
        n_label_buckets: int = 2**20,
        sparse: bool = False,
        word_dropout: float = 0.0,
        lexical: bool = True,
        distance_prior: float = 0.0,
        distance_prior_exempt: Sequence[int] = (),
    ) -> None:
        super().__init__()
        if not 0.0 <= word_dropout < 1.0:
            raise ValueError(f"word_dropout={word_dropout}: must lie in [0, 1)")
        if not distance_prior >= 0.0:  # also rejects NaN
            raise ValueError(f"distance_prior={distance_prior}: must be a number >= 0")
        self.word_dropout = word_dropout
        self.lexical = lexical
        self.distance_prior = float(distance_prior)
        for name, value in (("n_words", n_words), ("n_upos", n_upos)):
            if value < 3:
                raise ValueError(f"{name}={value}: a vocabulary holds at least PAD, UNK and ROOT")
        exempt = sorted({int(i) for i in distance_prior_exempt})
        bad = [i for i in exempt if not N_SPECIAL <= i < n_upos]  # PAD, UNK, ROOT are no tags
        if bad:
            raise ValueError(
                f"distance_prior_exempt={list(distance_prior_exempt)}: UPOS ids {bad} are not "
                f"tag ids ({N_SPECIAL}..{n_upos - 1})"
            )
        self.distance_prior_exempt = tuple(exempt)
        # [n_upos] bool: True for the tags whose dependents get no distance prior (not saved:
        # it is rebuilt from the config, so old checkpoints still load)
        is_exempt = torch.zeros(n_upos, dtype=torch.bool)
        is_exempt[list(exempt)] = True
        self.register_buffer("_prior_exempt", is_exempt, persistent=False)
        if n_rels < 0 or n_buckets < 1 or n_label_buckets < 1:
            raise ValueError(
                f"n_rels={n_rels}, n_buckets={n_buckets}, n_label_buckets={n_label_buckets}: "
                "need n_rels >= 0 and positive table sizes"
            )
        self.n_words, self.n_upos, self.n_rels = n_words, n_upos, n_rels
        self.weights = nn.Embedding(n_buckets, 1, sparse=sparse)
        nn.init.zeros_(self.weights.weight)
        self.label_weights = None
        if n_rels > 0:
            self.label_weights = nn.Embedding(n_label_buckets, 1, sparse=sparse)
            nn.init.zeros_(self.label_weights.weight)

    def forward(self, batch: Batch, *, layers: bool = True) -> EdgeScores:
        """arcs ``[B, dep, head]``; labels ``[B, dep, head, L]`` or ``None``. (No layer heads:
        ``layers`` is the biaffine scorer's option.)"""
        check_batch(batch, n_words=self.n_words, n_upos=self.n_upos)
        if self.training and self.word_dropout > 0 and self.lexical:  # (unlexicalized: no word read)
            batch = self._drop_words(batch)
        direction, distance = direction_and_distance(
            batch.words.shape[1], device=batch.words.device
        )
        arcs = self.arc_scores(batch, direction=direction, distance=distance)
        labels = None
        if self.label_weights is not None:
            labels = self.label_scores(batch, direction=direction, distance=distance)
        return EdgeScores(arcs=arcs, labels=labels)

    def _drop_words(self, batch: Batch) -> Batch:
        """A copy of ``batch`` with each real word read as UNK with probability ``word_dropout``."""
        drop = dropped_words(batch.word_mask, self.word_dropout)
        words = batch.words.masked_fill(drop, UNK)
        unknown = torch.zeros_like(batch.chars[0, 0])
        unknown[0] = UNK
        chars = torch.where(drop[..., None], unknown, batch.chars)
        return replace(batch, words=words, chars=chars)

    def _lookup(self, table: nn.Embedding, ids: list[Tensor]) -> list[Tensor]:
        """The weights of each id tensor, keeping its shape. One embedding call for all of them:
        each call's backward materialises a gradient the size of the whole table."""
        flat = torch.cat([i.reshape(-1) for i in ids]) % table.num_embeddings
        if table.sparse:
            weights = F.embedding(flat, table.weight, sparse=True).squeeze(-1)
        else:  # index_select's backward (index_add) is several times faster than embedding's
            weights = table.weight.squeeze(-1).index_select(0, flat)
        return [w.view(i.shape) for w, i in zip(weights.split([i.numel() for i in ids]), ids)]

    def arc_scores(self, batch: Batch, *, direction: Tensor, distance: Tensor) -> Tensor:
        """``[B, dep, head]``; ``direction``, ``distance`` ``[N+1, N+1]`` from
        ``direction_and_distance``."""
        batch_size, width = batch.words.shape
        sources = arc_sources(  # (no prefix/suffix hashes when no template reads them)
            batch.words, batch.upos, batch.lengths, n_upos=self.n_upos,
            chars=batch.chars if self.lexical else None,
        )
        templates = range(len(ARC_TEMPLATES)) if self.lexical else UNLEXICALIZED
        ids = []
        for template in templates:  # a loop over templates, not tokens
            plain = hash_values(template, *(sources[name] for name in ARC_TEMPLATES[template]))
            ids += [plain, hash_extend(plain, direction, distance)]
        if not self.lexical:
            ids.append(hash_values(DISTANCE_TEMPLATE, direction, distance))  # [N+1, N+1]
        # In between: (hp, t, dp) for each UPOS t, weighted by how many words between carry t.
        # Its weights depend on tags, direction and distance only: hash the small table
        # [T(head), T(dep), 2, bins, T(between)] once and gather it per arc.
        device = batch.words.device
        tags = torch.arange(self.n_upos, device=device)
        t_head, t_dep = tags[:, None, None, None, None], tags[None, :, None, None, None]
        dirs = torch.arange(2, device=device)[:, None, None]
        bins = torch.arange(N_DISTANCE_BINS, device=device)[:, None]
        plain = hash_values(BETWEEN_TEMPLATE, t_head, tags, t_dep)  # [T, T, 1, 1, T]
        ids += [plain, hash_extend(plain, dirs, bins)]

        *weights, between_plain, between_conjoined = self._lookup(self.weights, ids)
        scores = self.weights.weight.new_zeros(batch_size, width, width)
        for weight in weights:  # shapes [B, 1, N+1], [B, N+1, 1] or [B, N+1, N+1]
            scores = scores + weight
        between = between_plain + between_conjoined  # [T, T, 2, bins, T]
        per_arc = between[batch.upos[:, None, :], batch.upos[:, :, None], direction, distance]
        counts = between_counts(batch.upos, batch.lengths, n_upos=self.n_upos)
        scores = scores + (per_arc * counts).sum(-1)  # per_arc, counts: [B, dep, head, T]
        if self.distance_prior > 0:
            prior = self.distance_prior * log_inverse_distance(width, device=device)  # [dep, head]
            if self.distance_prior_exempt:
                exempt = self._prior_exempt[batch.upos]  # [B, dep]: the dependent's tag
                prior = prior.masked_fill(exempt[:, :, None], 0.0)
            scores = scores + prior
        return scores

    def extra_repr(self) -> str:
        exempt = f", distance_prior_exempt={self.distance_prior_exempt}"
        return f"lexical={self.lexical}, distance_prior={self.distance_prior}" + (
            exempt if self.distance_prior_exempt else ""
        )

    def label_scores(self, batch: Batch, *, direction: Tensor, distance: Tensor) -> Tensor:
        """``[B, dep, head, L]``."""
        assert self.label_weights is not None
        device = batch.words.device
        rels = torch.arange(self.n_rels, device=device)
        tags = torch.arange(self.n_upos, device=device)
        t_head, t_dep = tags[:, None, None, None], tags[None, :, None, None]
        dirs = torch.arange(2, device=device)
        bins = torch.arange(N_DISTANCE_BINS, device=device)
        ids = [
            hash_values(LABEL_BIAS, rels),  # [L]
            hash_values(LABEL_HP, t_head, rels),  # [T, 1, 1, L]
            hash_values(LABEL_DP, t_dep, rels),  # [1, T, 1, L]
            hash_values(LABEL_PAIR, t_head, t_dep, rels),  # [T, T, 1, L]
            hash_values(LABEL_PAIR_DIR, t_head, t_dep, dirs[:, None], rels),  # [T, T, 2, L]
            hash_values(LABEL_DIST, dirs[:, None, None], bins[:, None], rels),  # [2, bins, L]
        ]
        if self.lexical:
            ids += [
                hash_values(LABEL_HW, batch.words[:, None, :, None], rels),  # [B, 1, N+1, L]
                hash_values(LABEL_DW, batch.words[:, :, None, None], rels),  # [B, N+1, 1, L]
            ]
        bias, hp, dp, pair, pair_dir, dist, *word_weights = self._lookup(self.label_weights, ids)
        # Every feature made of (head tag, dependent tag, direction) folds into one
        # [T(head), T(dep), 2, L] table, gathered once per arc.
        pos_table = bias + hp + dp + pair + pair_dir
        head_tag, dep_tag = batch.upos[:, None, :], batch.upos[:, :, None]
        scores = pos_table[head_tag, dep_tag, direction] + dist[direction, distance]
        for weights in word_weights:  # head word [B, 1, N+1, L], dependent word [B, N+1, 1, L]
            scores = scores + weights
        return scores


def log_inverse_distance(width: int, *, device: torch.device | str | None = None) -> Tensor:
    """``[dep, head]`` (``[N+1, N+1]``): ``-log|dep - head|`` between two words; 0 on ROOT arcs
    (row or column 0) and on the diagonal (self-loops, which the tree CRF masks anyway)."""
    positions = torch.arange(width, device=device)
    gap = (positions[:, None] - positions[None, :]).abs().float()
    harmonic = -gap.clamp_min(1).log()
    words = (positions[:, None] > 0) & (positions[None, :] > 0)
    return torch.where(words, harmonic, torch.zeros_like(harmonic))
