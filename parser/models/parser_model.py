"""The trained parser: a vocabulary-sized edge scorer plus how its scores become trees.

``ParserModel`` is what a checkpoint restores: ``build_parser(model_cfg, vocabs)`` makes a fresh
one, ``forward(batch)`` gives the ``ParserOutput`` the objectives consume, and ``decode`` the best
tree (maximum spanning tree under the root constraint) and its relations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from parser.config import EncoderKind, LabelMode, ModelConfig, ScorerKind, UposInput
from parser.constraints.spec import UPOS_TAGS
from parser.data.batch import Batch
from parser.data.vocab import ROOT, UNK, Vocab
from parser.models.build import build_scorer, scorer_options
from parser.models.char_encoder import CharLSTM
from parser.models.edge_scores import CRF_KINDS, EdgeScores, to_output
from parser.models.ud_rules import UDRules, choose_relations, constrain, parse_rules
from parser.structs import ParserOutput, attach_punct_projectively, attach_to_units, eisner
from parser.structs.common import word_mask

__all__ = [
    "ParserModel", "TaggedOutput", "build_parser", "reads_own_tags", "scorer_kwargs", "tempered", "ud_rules_of",
    "upos_ids",
]

N_SPECIAL_TAGS = 3  # UPOS ids 0..2 (PAD, UNK, ROOT): never a word's tag


@dataclass(frozen=True)
class TaggedOutput(ParserOutput):
    """A ``ParserOutput`` of a parser with a UPOS head.

    upos:      ``[B, N+1]`` the tags the rest of the pipeline reads (decoding, GE features): the
               head's argmax where the model reads its own tags, else the batch's with its
               unknown (``_``) tags filled in; ROOT id at 0, PAD beyond each length.
    tag_scores: ``[B, N+1, T]`` the head's logits.
    auxiliary: ``{"tags": weighted cross-entropy per tagged word}`` on a labeled training batch
               (the objective adds it, ``parser.objectives.weighted``); empty otherwise.
    """

    upos: Tensor | None = None
    tag_scores: Tensor | None = None
    auxiliary: dict[str, Tensor] = field(default_factory=dict)


def reads_own_tags(model_cfg: Mapping[str, Any]) -> bool:
    """Whether a parser with this (stored) model config predicts the tags it needs, so that
    parser-predict needs neither gold UPOS nor a tagger: it has a UPOS head and does not embed
    the data's UPOS column."""
    upos_input = str(model_cfg.get("upos_input", "gold"))
    return float(model_cfg.get("tag_loss_weight", 0.0) or 0.0) > 0 and upos_input != "gold"

N_SPECIAL_RELS = 3  # relation ids 0..2 (PAD, UNK, ROOT) are never gold: never predicted


def scorer_kwargs(cfg: ModelConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The config's options that the chosen scorer accepts, as plain Python values."""
    kind = ScorerKind(cfg["kind"] if isinstance(cfg, Mapping) else cfg.kind).value
    get = (lambda k: cfg[k]) if isinstance(cfg, Mapping) else (lambda k: getattr(cfg, k))
    options = {}
    for name in scorer_options(kind):
        try:
            options[name] = get(name)
        except (KeyError, AttributeError):
            continue  # the scorer's own default
    return options


class ParserModel(nn.Module):
    """An edge scorer with its label mode (``joint`` or ``classifier``), root constraint, tree
    distribution (``crf``: ``matrix_tree``, non-projective, or ``projective``) and decoder (maximum
    spanning tree, or with ``projective`` the best projective tree; a projective CRF always
    decodes projectively)."""

    def __init__(self, scorer: nn.Module, *, labels: str, single_root: bool, projective: bool = False,
                 crf: str = "matrix_tree", unit_tags: tuple[int, ...] = (),
                 tag_loss_weight: float = 0.0, own_tags: bool = False,
                 ud_rules: UDRules | None = None) -> None:
        super().__init__()
        self.tag_loss_weight = float(tag_loss_weight)
        self.own_tags = own_tags  # the head's tags everywhere, not only where the data has none
        self.scorer = scorer
        self.labels = LabelMode(labels).value
        self.single_root = single_root
        if crf not in CRF_KINDS:
            raise ValueError(f"model.crf={crf!r}: expected one of {', '.join(CRF_KINDS)}")
        if crf == "projective" and self.labels == LabelMode.joint.value:
            raise ValueError("model.crf=projective models unlabeled arcs: use model.labels=classifier with it")
        self.projective = projective
        self.crf = crf
        self.unit_tags = tuple(unit_tags)  # UPOS ids re-attached after decoding (attach_to_units)
        # Prediction-time only (eval mode): UD rules on the scores (parser.models.ud_rules) and
        # the temperatures of arc and relation scores fitted on dev (calibration).
        self.ud_rules = ud_rules
        self.arc_temperature = 1.0
        self.label_temperature = 1.0

    def forward(self, batch: Batch) -> ParserOutput:
        edge_scores = self.scorer(batch)
        if not self.training:
            edge_scores = self.for_prediction(edge_scores)
        out = to_output(edge_scores, batch.lengths, labels=self.labels, single_root=self.single_root,
                        crf=self.crf)
        if edge_scores.tags is None:
            return out
        return self._tagged(out, edge_scores.tags, batch)

    def remembering_forms(self, chars: Sequence[Tensor]) -> AbstractContextManager:
        """A block within which the character encoder (if any) has encoded the forms of ``chars``
        (one ``[n+1, C]`` id tensor per sentence, ``EncodedSentence.chars``) once, for every
        batch of them (:meth:`CharLSTM.remembering`); nothing changes with autograd on."""
        encoder = getattr(self.scorer, "char_encoder", None)
        if not isinstance(encoder, CharLSTM) or torch.is_grad_enabled() or not chars:
            return nullcontext()
        width = max(int(c.shape[1]) for c in chars)
        rows = torch.cat([nn.functional.pad(c, (0, width - int(c.shape[1]))) for c in chars])
        return encoder.remembering(rows.to(encoder.project.weight.device))

    def for_prediction(self, edge_scores: EdgeScores) -> EdgeScores:
        """The scores a trained parser predicts from: masked by the UD rules (so that the argmax,
        marginals, k-best trees and samples obey them), then divided by the calibration
        temperatures (:func:`tempered`)."""
        constrained = constrain(edge_scores, self.ud_rules, labels=self.labels)
        return tempered(constrained, arc_temperature=self.arc_temperature,
                        label_temperature=self.label_temperature)

    def _tagged(self, out: ParserOutput, tag_scores: Tensor, batch: Batch) -> TaggedOutput:
        guess = tag_scores[..., N_SPECIAL_TAGS:].argmax(-1) + N_SPECIAL_TAGS
        words = batch.word_mask
        upos = guess if self.own_tags else torch.where(batch.upos == UNK, guess, batch.upos)
        upos = torch.where(words, upos, 0)
        upos[:, 0] = ROOT
        auxiliary = {}
        if self.training and self.tag_loss_weight > 0 and batch.is_labeled:
            gold = words & (batch.upos >= N_SPECIAL_TAGS)  # words with a known tag
            loss = nn.functional.cross_entropy(tag_scores[gold], batch.upos[gold], reduction="sum")
            auxiliary["tags"] = self.tag_loss_weight * loss / gold.sum().clamp(min=1)
        return TaggedOutput(dist=out.dist, label_scores=out.label_scores, upos=upos,
                            tag_scores=tag_scores, auxiliary=auxiliary)

    @torch.no_grad()
    def decode(self, out: ParserOutput, upos: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Best trees: ``heads`` ``[B, dep]`` and ``rels`` ``[B, dep]`` (``None`` if unlabeled).

        The tree is the maximum spanning tree, or the best projective one when
        ``self.projective``; then the words whose UPOS (``upos [B, N+1]``; the model's own tags
        when it predicts them) is one of ``unit_tags`` are re-attached by the UD punct/cc rule
        (:func:`parser.structs.attach_to_units`), and with the UD punct rule the PUNCT words
        are attached without crossing arcs (:func:`parser.structs.attach_punct_projectively`;
        unless ``unit_tags`` names PUNCT: the guidelines' position is then kept).
        Relations: :meth:`relations`.
        """
        if getattr(out, "upos", None) is not None:
            upos = out.upos  # the model's own tags (TaggedOutput)
        punct = self._punct_words(upos)
        dist = out.dist
        if punct is not None:  # the root word is not punctuation (unless every word is)
            lone = (punct | ~word_mask(dist.lengths, punct.shape[1])).all(1)
            no_root = torch.zeros_like(dist.arc_mask)
            no_root[..., 0] = punct & ~lone[:, None]
            dist = dist.restrict(~no_root)
        best = dist.argmax(projective=self.projective)
        heads = best[0] if isinstance(best, tuple) else best
        lengths = dist.lengths
        if self.unit_tags:
            if upos is None:
                raise ValueError("ParserModel.decode: attach_to_units needs the batch's UPOS (upos=)")
            marked = torch.isin(upos, torch.tensor(self.unit_tags, device=upos.device))
            heads = attach_to_units(heads, lengths, marked)
        if punct is not None and self.ud_rules.punct_tag not in self.unit_tags:
            # (attach_to_units naming PUNCT: the guidelines' position, asked for, is kept.)
            # The scores the argmax maximises (joint labels: each arc's best label), so that a
            # temperature, which rescales them, cannot change the tree.
            arc_scores = dist.labeled_scores.amax(-1) if getattr(dist, "labeled", False) else dist.arc_scores
            heads, stuck = attach_punct_projectively(heads, lengths, punct, arc_scores)
            if bool(stuck.any()) and not self.projective:
                # A mark in the gap of crossing arcs has no valid head: those sentences (only
                # they: Eisner is O(N^3) per sentence) get the best projective tree by the scores
                # the argmax maximises, where one always exists.
                rows = stuck.nonzero().squeeze(1)
                projective = eisner(arc_scores[rows], lengths[rows], single_root=dist.single_root)
                again, _ = attach_punct_projectively(projective, lengths[rows], punct[rows], arc_scores[rows])
                heads = heads.index_copy(0, rows, again)
        return heads, self.relations(out, heads, upos=upos)

    def _punct_words(self, upos: Tensor | None) -> Tensor | None:
        """``[B, N+1]`` the words the UD punct rule treats as punctuation (None: rule off)."""
        rules = self.ud_rules
        if rules is None or rules.punct_tag is None or upos is None:
            return None
        return upos == rules.punct_tag

    @torch.no_grad()
    def relations(self, out: ParserOutput, heads: Tensor, *, upos: Tensor | None = None) -> Tensor | None:
        """Relations ``[B, N+1]`` of the trees ``heads`` (None for an unlabeled model): each word's
        best relation on its arc (a classifier's best non-special one), except that the UD rules'
        one-subject / one-object limits choose each head's relations jointly
        (:func:`parser.models.ud_rules.choose_relations`) and their punct rule gives ``punct`` to
        the words tagged PUNCT (``upos``, or the model's own tags) and to no other word."""
        dist = out.dist
        if out.label_scores is not None:
            scores = out.label_scores
        elif getattr(dist, "labeled", False):
            scores = dist.labeled_scores
        else:
            return None
        index = heads.clamp(min=0)[..., None, None].expand(*heads.shape, 1, scores.shape[-1])
        on_arc = scores.gather(2, index).squeeze(2).clone()  # [B, dep, L]
        on_arc[..., :N_SPECIAL_RELS] = float("-inf")
        punct = self._punct_words(out.upos if getattr(out, "upos", None) is not None else upos)
        if punct is not None:  # (a punctuation mark alone in its sentence stays its root)
            punct = punct & (heads != 0)
            is_punct = torch.arange(on_arc.shape[-1], device=on_arc.device) == self.ud_rules.punct_rel
            on_arc = on_arc.masked_fill(punct[..., None] != is_punct, float("-inf"))
        words = word_mask(dist.lengths, heads.shape[1])
        chosen = choose_relations(on_arc, heads, words, self.ud_rules)
        return chosen.masked_fill(~words, 0)


def tempered(edge_scores: EdgeScores, *, arc_temperature: float, label_temperature: float) -> EdgeScores:
    """``edge_scores`` with arcs divided by ``arc_temperature`` and relation scores by
    ``label_temperature`` (:mod:`parser.inference.calibration` fits both on dev).

    Applied after the UD rules' masks, so a classifier's arc scores already carry the log of
    their allowed relations' probability: dividing them by T > 0 scales every arc alike, so the
    maximum spanning tree (and the best projective tree) are unchanged and only the marginals
    move. A joint model is calibrated with one temperature for both (its labeled scores are
    ``arcs + labels``: equal temperatures scale them alike; unequal ones would change its trees).
    """
    for name, value in (("arc_temperature", arc_temperature), ("label_temperature", label_temperature)):
        if not value > 0 or value == float("inf"):
            raise ValueError(f"{name}={value}: a temperature must be a positive finite number")
    if arc_temperature == 1.0 and label_temperature == 1.0:
        return edge_scores
    labels = edge_scores.labels
    return EdgeScores(arcs=edge_scores.arcs / arc_temperature,
                      labels=None if labels is None else labels / label_temperature,
                      tags=edge_scores.tags)


def build_parser(
    cfg: ModelConfig, sizes: Mapping[str, int], *, upos: Vocab | None = None,
    chars: Vocab | None = None, rels: Vocab | None = None,
) -> ParserModel:
    """A fresh parser for vocabularies of ``sizes`` (``words``, ``chars``, ``upos``, ``rels``).

    ``upos``, the UPOS vocabulary, maps the tag names of ``distance_prior_exempt`` and
    ``attach_to_units`` to ids; it is needed only when those lists are not empty. ``chars``,
    the character vocabulary, spells the words for a transformer encoder (needed only then).
    ``rels``, the relation vocabulary, names the relations of ``model.ud_rules`` (without it, no
    UD rule applies).
    """
    options = scorer_kwargs(cfg)
    upos_input = UposInput(_get(cfg, "upos_input", UposInput.gold))
    tag_loss_weight = float(_get(cfg, "tag_loss_weight", 0.0))
    if tag_loss_weight < 0:
        raise ValueError(f"model.tag_loss_weight={tag_loss_weight}: must be >= 0")
    if upos_input is UposInput.predicted and tag_loss_weight == 0:
        raise ValueError("model.upos_input=predicted reads the parser's own tags: set "
                         "model.tag_loss_weight > 0 to give it a UPOS head")
    kind = ScorerKind(cfg.kind).value
    if kind == ScorerKind.biaffine.value:
        encoder = _get(cfg, "encoder", None)
        encoder = (OmegaConf.to_container(encoder, enum_to_str=True) if OmegaConf.is_config(encoder)
                   else {k: getattr(v, "value", v) for k, v in vars(encoder).items()}
                   if encoder is not None and not isinstance(encoder, Mapping) else dict(encoder or {}))
        options["encoder"] = encoder
        options["use_upos"] = bool(options.get("use_upos", True)) and upos_input is UposInput.gold
        options["n_tags"] = sizes["upos"] if tag_loss_weight > 0 else 0
        if encoder.get("kind") == EncoderKind.transformer.value:
            if chars is None:
                raise ValueError("a transformer encoder spells the words from their characters: "
                                 "pass build_parser(chars=vocabs.chars)")
            options["char_tokens"] = list(chars.tokens)
    elif tag_loss_weight > 0 or upos_input is not UposInput.gold:
        raise ValueError(f"model.kind={kind}: model.tag_loss_weight and model.upos_input are "
                         "biaffine options (the log-linear templates read the data's UPOS)")
    if "distance_prior_exempt" in options:
        options["distance_prior_exempt"] = upos_ids(options["distance_prior_exempt"], upos)
    scorer = build_scorer(
        kind,
        n_words=sizes["words"],
        n_chars=sizes["chars"],
        n_upos=sizes["upos"],
        n_rels=sizes["rels"],
        options=options,
    )
    unit_tags = upos_ids(cfg.attach_to_units, upos, option="model.attach_to_units")
    return ParserModel(scorer, labels=LabelMode(cfg.labels).value, single_root=cfg.single_root,
                       projective=cfg.projective, crf=cfg.crf, unit_tags=unit_tags,
                       tag_loss_weight=tag_loss_weight, own_tags=upos_input is not UposInput.gold,
                       ud_rules=ud_rules_of(_get(cfg, "ud_rules", ()), rels, upos))


def ud_rules_of(names: Any, rels: Vocab | None, upos: Vocab | None = None) -> UDRules | None:
    """The UD rules ``names`` (``all``/``none``/a list, :func:`parser.models.ud_rules.parse_rules`)
    over the relation vocabulary ``rels`` (and ``upos`` for the punct rule); None without one."""
    if rels is None:
        return None
    if OmegaConf.is_config(names):
        names = OmegaConf.to_container(names)
    return UDRules.from_vocab(rels, parse_rules(names if names is not None else "none"), upos=upos)


def _get(cfg: ModelConfig | Mapping[str, Any], key: str, default: Any) -> Any:
    if isinstance(cfg, Mapping) or OmegaConf.is_config(cfg):
        return cfg.get(key, default)
    return getattr(cfg, key, default)


def upos_ids(names: Any, upos: Vocab | None, *, option: str = "model.distance_prior_exempt") -> tuple[int, ...]:
    """The ids of the UPOS tag ``names`` (the config ``option``, for messages) in ``upos``.

    A name outside the 17 UD tags is an error (a typo would otherwise select nothing, silently).
    A UD tag that the training data never used has no id and is left out: no word carries it.
    """
    names = [names] if isinstance(names, str) else list(names or ())
    unknown = [name for name in names if name not in UPOS_TAGS]
    if unknown:
        raise ValueError(f"{option}: {unknown} not UD UPOS tags; known: {', '.join(UPOS_TAGS)}")
    if not names:
        return ()
    if upos is None:
        raise ValueError(
            f"{option} names UPOS tags, but no UPOS vocabulary was given to "
            "build_parser(upos=...) to map them to ids"
        )
    return tuple(upos.index(name) for name in names if name in upos)
