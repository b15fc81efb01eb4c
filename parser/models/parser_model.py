"""The trained parser: a vocabulary-sized edge scorer, its tag head and loss, and the decoder it
was configured with.

``ParserModel`` is what a checkpoint restores: ``build_parser(model_cfg, vocabs)`` makes a fresh
one and ``forward(batch)`` gives the ``ParserOutput`` the objectives consume. How scores become
trees (decoder choice, UD rules, temperatures) is its ``decoder``
(:class:`parser.models.decoder.Decoder`), a plain attribute: no weight, so checkpoints hold none
of it.
"""

from __future__ import annotations

import logging
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
from parser.data.layers import layer_of
from parser.data.vocab import ROOT, UNK, Vocab
from parser.models.biaffine import UPOS_FED
from parser.models.build import build_scorer, scorer_options
from parser.models.char_encoder import CharLSTM
from parser.models.decoder import Decoder
from parser.models.edge_scores import CRF_KINDS, EdgeScores, to_output
from parser.models.layers import LinearScores
from parser.models.ud_rules import UDRules, parse_rules
from parser.structs import ParserOutput

log = logging.getLogger(__name__)

__all__ = [
    "ParserModel", "TaggedOutput", "TreesOnly", "build_parser", "check_layer_inputs", "layers_of",
    "reads_own_tags",
    "scorer_kwargs", "ud_rules_of", "upos_ids",
]

N_SPECIAL_TAGS = 3  # UPOS ids 0..2 (PAD, UNK, ROOT): never a word's tag


@dataclass(frozen=True)
class TaggedOutput(ParserOutput):
    """A ``ParserOutput`` of a parser with a UPOS head or token-level layers.

    upos:      ``[B, N+1]`` the tags the rest of the pipeline reads (decoding, GE features): the
               head's argmax where the model reads its own tags, else the batch's with its
               unknown (``_``) tags filled in; ROOT id at 0, PAD beyond each length; None
               without a UPOS head.
    tag_scores: ``[B, N+1, T]`` the UPOS head's logits (None without one).
    layer_scores: ``[B, N+1, C]`` class scores of each token-level layer, by name (computed where
                  read in prediction: ``EdgeScores.layers``).
    auxiliary: ``{"tags": ..., <layer name>: ...}``: each head's weighted cross-entropy per
               annotated word on a labeled training batch (the objective adds them,
               ``parser.objectives.weighted``); empty otherwise.
    """

    upos: Tensor | None = None
    tag_scores: Tensor | None = None
    layer_scores: dict[str, Tensor | LinearScores] = field(default_factory=dict)
    auxiliary: dict[str, Tensor] = field(default_factory=dict)


def reads_own_tags(model_cfg: Mapping[str, Any]) -> bool:
    """Whether a parser with this (stored) model config predicts the tags it needs, so that
    parser-predict needs neither gold UPOS nor a tagger: it has a UPOS head and does not embed
    the data's UPOS column."""
    upos_input = str(model_cfg.get("upos_input", "gold"))
    return float(model_cfg.get("tag_loss_weight", 0.0) or 0.0) > 0 and upos_input != "gold"


def scorer_kwargs(cfg: ModelConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The config's options that the chosen scorer accepts, as plain Python values."""
    kind = ScorerKind(cfg["kind"] if isinstance(cfg, Mapping) else cfg.kind).value
    # an option the config lacks: the scorer's own default (looked up, not caught: a stored
    # config's missing key costs omegaconf a formatted exception, 20 ms of a model's loading)
    if isinstance(cfg, Mapping):
        return {name: cfg[name] for name in scorer_options(kind) if name in cfg}
    return {name: getattr(cfg, name) for name in scorer_options(kind) if hasattr(cfg, name)}


class TreesOnly:
    """A :class:`ParserModel`'s forward with ``layers=False``, and its ``decoder``: what the
    self-training terms read from their teacher (:mod:`parser.objectives.teacher`). The layer
    heads' scores are left out; the trees, tags and relations are the model's own, labels scored
    as its decoder scores them (``label_grid``: at the heads only, the distribution it decodes)."""

    def __init__(self, model: ParserModel) -> None:
        self.model, self.decoder = model, model.decoder

    def __call__(self, batch: Batch) -> ParserOutput:
        return self.model(batch, layers=False, label_grid=self.decoder.label_grid)


class ParserModel(nn.Module):
    """An edge scorer with its label mode (``joint`` or ``classifier``), root constraint and tree
    distribution (``crf``: ``matrix_tree``, non-projective, or ``projective``), plus the
    ``decoder`` that predictions use (default: maximum spanning tree, no UD rule; a projective CRF
    always decodes projectively). In eval mode the scores are the decoder's
    (:meth:`Decoder.scores`: UD label masks, temperatures), so that every reader of a trained
    parser's distribution (decoding, confidence, a KL teacher) sees the same one."""

    def __init__(self, scorer: nn.Module, *, labels: str, single_root: bool,
                 crf: str = "matrix_tree", tag_loss_weight: float = 0.0, own_tags: bool = False,
                 decoder: Decoder | None = None,
                 layer_weights: Mapping[str, float] | None = None, layer_weight: float = 1.0) -> None:
        super().__init__()
        self.layer_weights = dict(layer_weights or {})  # by layer name; layer_weight where not given
        self.layer_weight = float(layer_weight)
        self.tag_loss_weight = float(tag_loss_weight)
        self.own_tags = own_tags  # the head's tags everywhere, not only where the data has none
        self.scorer = scorer
        self.labels = LabelMode(labels).value
        self.single_root = single_root
        if crf not in CRF_KINDS:
            raise ValueError(f"model.crf={crf!r}: expected one of {', '.join(CRF_KINDS)}")
        if crf == "projective" and self.labels == LabelMode.joint.value:
            raise ValueError("model.crf=projective models unlabeled arcs: use model.labels=classifier with it")
        self.crf = crf
        self.decoder = decoder if decoder is not None else Decoder(labels=self.labels)

    def forward(self, batch: Batch, *, layers: bool = True, label_grid: bool = True) -> ParserOutput:
        """The tree distribution of ``batch``; ``layers``: False leaves the token-level layers'
        scores out (a caller that reads only the trees: ``parse(columns=False)``);
        ``label_grid``: False, labels scored on the arcs asked for only (``ParserOutput.label_at``;
        prediction, with ``model.label_grid=false``)."""
        edge_scores = (self.scorer(batch, layers=layers) if label_grid else
                       self.scorer(batch, layers=layers, label_grid=False))
        if not self.training:
            edge_scores = self.decoder.scores(edge_scores)
        return self.output(edge_scores, batch)

    def trees_only(self) -> TreesOnly:
        """This model as a callable ``Batch -> ParserOutput`` without its token-level layers'
        heads: for a caller that reads only the tree distribution (a self-training teacher)."""
        return TreesOnly(self)

    def output(self, edge_scores: EdgeScores, batch: Batch) -> ParserOutput:
        """The tree distribution of ``edge_scores``, with the tag head's tags and loss when it
        has one: what ``forward`` returns, and what a DDP replica's scores become."""
        out = to_output(edge_scores, batch.lengths, labels=self.labels, single_root=self.single_root,
                        crf=self.crf)
        if edge_scores.tags is None and not edge_scores.layers:
            return out
        upos, auxiliary = None, {}
        if edge_scores.tags is not None:
            upos, tag_loss = self._tags(edge_scores.tags, batch)
            if tag_loss is not None:
                auxiliary["tags"] = tag_loss
        if self.training and batch.layers:
            for name, scores in edge_scores.layers.items():
                weight = float(self.layer_weights.get(name, self.layer_weight))
                if name in batch.layers and weight > 0:
                    auxiliary[name] = weight * layer_of(name).loss(scores, batch.layers[name])
        return TaggedOutput(dist=out.dist, label_scores=out.label_scores, label_at=out.label_at, upos=upos,
                            tag_scores=edge_scores.tags, layer_scores=dict(edge_scores.layers),
                            auxiliary=auxiliary)

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

    def _tags(self, tag_scores: Tensor, batch: Batch) -> tuple[Tensor, Tensor | None]:
        """The UPOS the model reads (see ``TaggedOutput.upos``) and, on a labeled training
        batch, the UPOS head's weighted loss (else None)."""
        guess = tag_scores[..., N_SPECIAL_TAGS:].argmax(-1) + N_SPECIAL_TAGS
        words = batch.word_mask
        upos = guess if self.own_tags else torch.where(batch.upos == UNK, guess, batch.upos)
        upos = torch.where(words, upos, 0)
        upos[:, 0] = ROOT
        loss = None
        if self.training and self.tag_loss_weight > 0 and batch.is_labeled:
            gold = words & (batch.upos >= N_SPECIAL_TAGS)  # words with a known tag
            loss = nn.functional.cross_entropy(tag_scores[gold], batch.upos[gold], reduction="sum")
            loss = self.tag_loss_weight * loss / gold.sum().clamp(min=1)
        return upos, loss


def build_parser(
    cfg: ModelConfig, sizes: Mapping[str, int], *, upos: Vocab | None = None,
    chars: Vocab | None = None, rels: Vocab | None = None,
    layer_sizes: Mapping[str, int] | None = None, vector_rows: Tensor | None = None,
    layer_vocabs: Mapping[str, Vocab] | None = None,
) -> ParserModel:
    """A fresh parser for vocabularies of ``sizes`` (``words``, ``chars``, ``upos``, ``rels``),
    with a head for each token-level layer of ``layer_sizes`` (name -> classes:
    ``Vocabularies.layer_sizes()``; the model's layers are its vocabularies', so a checkpoint
    from before layers has none whatever ``cfg.layers`` says).

    ``upos``, the UPOS vocabulary, maps the tag names of ``distance_prior_exempt`` and
    ``attach_to_units`` to ids; it is needed only when those lists are not empty. ``chars``,
    the character vocabulary, spells the words for a transformer encoder (needed only then).
    ``rels``, the relation vocabulary, names the relations of ``model.ud_rules`` (without it, no
    UD rule applies). With ``model.vectors``, ``sizes`` also gives ``vectors`` and ``vector_dim``
    (``Vocabularies.sizes()``) and ``vector_rows`` the rows a new model starts from
    (``[vectors, vector_dim]``; None: zeros, for a checkpoint's weights to fill).
    ``layer_vocabs`` (``Vocabularies.layers``): the layers' classes, which a head built from the
    class strings reads (``feats_factored``).
    """
    options = scorer_kwargs(cfg)
    options.pop("vectors", None)
    fed = check_layer_inputs(cfg)
    options.pop("layer_inputs", None)
    vectors = _plain(_get(cfg, "vectors", None))
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
        options["layer_sizes"] = dict(layer_sizes or {})
        options["layer_classes"] = {name: vocab.tokens for name, vocab in (layer_vocabs or {}).items()
                                    if name in options["layer_sizes"]}
        options["layer_inputs"] = [name for name in fed
                                   if name in options["layer_sizes"] or name == UPOS_FED]
        if len(options["layer_inputs"]) < len(fed):
            log.warning("model.layer_inputs: %s not predicted (no classes in the vocabularies: the "
                        "column is '_' on every training word, or a model from before layers), "
                        "so not fed to the parser",
                        [name for name in fed if name not in options["layer_inputs"]])
        options["vectors"] = vectors
        if vectors.get("path"):
            options["vector_rows"] = vector_rows
        if encoder.get("kind") == EncoderKind.transformer.value:
            if chars is None:
                raise ValueError("a transformer encoder spells the words from their characters: "
                                 "pass build_parser(chars=vocabs.chars)")
            options["char_tokens"] = list(chars.tokens)
    elif vectors.get("path"):
        raise NotImplementedError(f"model.vectors with model.kind={kind}: pretrained vectors "
                                  "enter the biaffine scorer's word input only")
    elif tag_loss_weight > 0 or upos_input is not UposInput.gold or layer_sizes:
        raise ValueError(f"model.kind={kind}: model.tag_loss_weight, model.upos_input and "
                         "model.layers are biaffine options (the log-linear templates read the "
                         "data's UPOS and have no encoder states for a layer's head)")
    if "distance_prior_exempt" in options:
        options["distance_prior_exempt"] = upos_ids(options["distance_prior_exempt"], upos)
    scorer = build_scorer(
        kind,
        n_words=sizes["words"],
        n_chars=sizes["chars"],
        n_upos=sizes["upos"],
        n_rels=sizes["rels"],
        n_vectors=int(sizes.get("vectors", 0)),
        vector_dim=int(sizes.get("vector_dim", 0)),
        options=options,
    )
    unit_tags = upos_ids(cfg.attach_to_units, upos, option="model.attach_to_units")
    labels = LabelMode(cfg.labels).value
    label_grid = bool(_get(cfg, "label_grid", True))
    if not label_grid and (kind != "biaffine" or labels != LabelMode.classifier.value):
        raise ValueError(f"model.label_grid=false scores labels on the decoded arcs only: it needs "
                         f"model.kind=biaffine and model.labels=classifier (got {kind}, {labels}); "
                         "add model.label_grid=true (the default experiment, fast_cpu, sets false)")
    decoder = Decoder(labels=labels, projective=bool(cfg.projective), unit_tags=unit_tags,
                      ud_rules=ud_rules_of(_get(cfg, "ud_rules", ()), rels, upos),
                      label_grid=label_grid)
    weights = _get(cfg, "layer_weights", None) or {}
    weights = dict(OmegaConf.to_container(weights) if OmegaConf.is_config(weights) else weights)
    unknown = sorted(set(weights) - set(_layer_names(cfg)))
    if unknown:
        raise ValueError(f"model.layer_weights names {unknown}, not in model.layers "
                         f"{list(_layer_names(cfg))}")
    layer_weight = float(_get(cfg, "layer_weight", 1.0))
    given = {"model.layer_weight": layer_weight,
             **{f"model.layer_weights.{name}": float(w) for name, w in weights.items()}}
    if any(w < 0 for w in given.values()):
        raise ValueError(f"a layer's loss weight must be >= 0 (0 trains no head): got {given}")
    return ParserModel(scorer, labels=labels, single_root=cfg.single_root, crf=cfg.crf,
                       tag_loss_weight=tag_loss_weight, own_tags=upos_input is not UposInput.gold,
                       decoder=decoder, layer_weights=weights, layer_weight=layer_weight)


def check_layer_inputs(cfg: ModelConfig | Mapping[str, Any]) -> list[str]:
    """The names of ``cfg.layer_inputs`` (the heads whose predicted classes feed the parser),
    checked against the rest of the model config before any data is read: each must be one of
    ``cfg.layers`` or ``upos``, the parser's own UPOS head, which needs ``model.upos_input=
    predicted`` (ValueError), and the scorer must have the BiLSTM they feed (a biaffine scorer
    with at least 2 BiLSTM layers: NotImplementedError for the log-linear scorer, ``model.encoder=
    cnn`` and a transformer without ``model.encoder.lstm_layers`` >= 2)."""
    names = [str(name) for name in (_get(cfg, "layer_inputs", None) or [])]
    if not names:
        return []
    layers = _layer_names(cfg)
    outside = [name for name in names if name not in (*layers, UPOS_FED)]
    if outside or len(set(names)) < len(names):
        raise ValueError(f"model.layer_inputs={names}: each must be one of model.layers {layers} "
                         f"or {UPOS_FED}, once" + (f" ({outside} not)" if outside else ""))
    own_tags = (UposInput(_get(cfg, "upos_input", UposInput.gold)) is UposInput.predicted
                and float(_get(cfg, "tag_loss_weight", 0.0)) > 0)
    if UPOS_FED in names and not own_tags:
        raise ValueError(f"model.layer_inputs={names}: {UPOS_FED} feeds the parser's own UPOS "
                         "head's tags, which needs model.upos_input=predicted and "
                         "model.tag_loss_weight > 0 (with gold UPOS read as input there is "
                         "nothing to feed)")
    kind = ScorerKind(_get(cfg, "kind", ScorerKind.biaffine)).value
    if kind != ScorerKind.biaffine.value:
        raise NotImplementedError(f"model.layer_inputs with model.kind={kind}: the predicted tags "
                                  "feed the biaffine scorer's BiLSTM only")
    encoder = _plain(_get(cfg, "encoder", None))
    encoder_kind = str(getattr(encoder.get("kind"), "value", encoder.get("kind") or "bilstm"))
    depth = (int(encoder.get("lstm_layers", 0)) if encoder_kind == EncoderKind.transformer.value
             else int(_get(cfg, "lstm_layers", 3)))
    if encoder_kind == EncoderKind.cnn.value or depth < 2:
        option = {"cnn": "model/encoder=cnn (no BiLSTM)",
                  "transformer": f"model.encoder.lstm_layers={depth}"}.get(encoder_kind,
                                                                          f"model.lstm_layers={depth}")
        raise NotImplementedError(
            f"model.layer_inputs={names} with {option}: the tags are predicted from the first "
            "BiLSTM layer and feed the ones above it, so the encoder needs at least 2 BiLSTM "
            "layers (or model.layer_inputs=[])")
    return names


def layers_of(cfg: ModelConfig | Mapping[str, Any]) -> list:
    """The token-level layers ``cfg.layers`` names (:func:`parser.data.layers.layer_of`; an
    unknown name is an error naming the registered ones, two layers of one column another)."""
    layers = [layer_of(name) for name in _layer_names(cfg)]
    for column in {layer.column for layer in layers}:
        same = [layer.name for layer in layers if layer.column == column]
        if len(same) > 1:
            raise ValueError(f"model.layers: {same} all predict the {column} column; name one")
    return layers


def _layer_names(cfg: ModelConfig | Mapping[str, Any]) -> list[str]:
    names = _get(cfg, "layers", None) or []
    return [str(name) for name in names]


def ud_rules_of(names: Any, rels: Vocab | None, upos: Vocab | None = None) -> UDRules | None:
    """The UD rules ``names`` (``all``/``none``/a list, :func:`parser.models.ud_rules.parse_rules`)
    over the relation vocabulary ``rels`` (and ``upos`` for the punct rule); None without one."""
    if rels is None:
        return None
    if OmegaConf.is_config(names):
        names = OmegaConf.to_container(names)
    return UDRules.from_vocab(rels, parse_rules(names if names is not None else "none"), upos=upos)


def _plain(node: Any) -> dict[str, Any]:
    """A config node (DictConfig, dataclass, mapping or None) as a plain dict, enums as text."""
    if node is None:
        return {}
    if OmegaConf.is_config(node):
        return OmegaConf.to_container(node, enum_to_str=True)
    if not isinstance(node, Mapping):
        return {k: getattr(v, "value", v) for k, v in vars(node).items()}
    return dict(node)


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
