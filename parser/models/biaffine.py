"""The deep biaffine edge scorer of Dozat & Manning (2017)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from parser.data.batch import Batch
from parser.data.layers import UposColumn, layer_of
from parser.data.vocab import PAD, ROOT, UNK
from parser.models.char_encoder import CharLSTM
from parser.models.checks import check_batch
from parser.models.edge_scores import EdgeScores
from parser.models.layers import (
    MLP,
    Biaffine,
    Bilinear,
    BiLSTM,
    ConvEncoder,
    LinearScores,
    dropped_words,
)
from parser.models.transformer import TransformerEncoder
from parser.models.word_vectors import WordVectors

UPOS_FED = "upos"  # model.layer_inputs' name of the UPOS head (not a token-level layer)
UPOS_COLUMN = UposColumn()  # the UPOS head's classes, predicted as a layer's are


class BiaffineScorer(nn.Module):
    """Word embeddings (+ character BiLSTM vectors, summed) and optional UPOS embeddings feed a
    multi-layer BiLSTM; four MLPs project its states to arc-dep, arc-head, rel-dep and rel-head
    spaces; a biaffine layer scores arcs ``[B, dep, head]`` and a bilinear layer labels
    ``[B, dep, head, L]`` (``None`` when ``n_rels == 0``).

    ``word_dropout`` replaces real words (not ROOT, not padding) by UNK during training, so the UNK
    embedding learns to stand for rare words. ``lstm_hidden`` is per direction. Defaults are
    Dozat & Manning's.

    ``use_words=False`` drops the word and character input: the BiLSTM reads the UPOS embeddings
    alone (``use_upos`` must then be True), so every decision generalises across all words with
    the same tag sequence (for training without trees, where constraints speak about tags only).

    ``encoder`` (``model.encoder``; ``None``: the BiLSTM) with ``kind: transformer`` reads the
    words with a pretrained transformer (:class:`~parser.models.transformer.TransformerEncoder`,
    which needs the character vocabulary ``char_tokens`` to spell them); its mixed features,
    with the word/character embeddings when ``encoder.use_chars`` and UPOS when ``use_upos``,
    go through ``encoder.lstm_layers`` BiLSTM layers (0: none) into the MLPs. With ``kind: cnn``
    residual convolutions (:class:`~parser.models.layers.ConvEncoder`, ``encoder.conv_width``,
    ``conv_depth``, ``conv_kernel``, ``conv_dilation``) replace the BiLSTM (``lstm_*`` are not read). ``n_tags`` > 0
    adds a UPOS head on the same states (``EdgeScores.tags``); ``layer_sizes`` (layer name ->
    number of classes; ``layer_classes``: their strings, for a head built from them) a head per
    token-level layer (:mod:`parser.data.layers`, ``EdgeScores.layers``). ``layer_inputs``
    (``model.layer_inputs``, names of ``layer_sizes``, and ``upos`` for the UPOS head) splits the
    BiLSTM after its first layer: those heads read its states,
    and the embeddings (``upos_dim`` wide) of their argmax classes, detached, join those states as
    the input of the ``lstm_layers - 1`` layers above, which the MLPs and the heads not fed read
    (UDPipe 2's tags fed to the parser; never the batch's column).

    ``vectors`` (``model.vectors``; its ``path`` null: none) adds pretrained word vectors
    (:class:`~parser.models.word_vectors.WordVectors`, ``n_vectors`` rows of ``vector_dim``,
    ``vector_rows`` their values for a new model, else read from a checkpoint) to the word and
    character embeddings, through a trained linear map; it needs that word input (the BiLSTM or
    CNN encoder, or a transformer with ``encoder.use_chars``).
    """

    def __init__(
        self,
        *,
        n_words: int,
        n_chars: int,
        n_upos: int,
        n_rels: int,
        word_dim: int = 100,
        char_dim: int = 50,
        char_hidden: int = 100,
        use_upos: bool = True,
        upos_dim: int = 100,
        lstm_hidden: int = 400,
        lstm_layers: int = 3,
        arc_mlp: int = 500,
        rel_mlp: int = 100,
        dropout: float = 0.33,
        word_dropout: float = 0.25,
        use_words: bool = True,
        encoder: Mapping[str, Any] | None = None,
        char_tokens: Sequence[str] = (),
        n_tags: int = 0,
        layer_sizes: Mapping[str, int] | None = None,
        layer_classes: Mapping[str, Sequence[str]] | None = None,
        vectors: Mapping[str, Any] | None = None,
        n_vectors: int = 0,
        vector_dim: int = 0,
        vector_rows: torch.Tensor | None = None,
        layer_inputs: Sequence[str] = (),
    ) -> None:
        super().__init__()
        encoder = {key: getattr(value, "value", value) for key, value in (encoder or {}).items()}
        transformer_chosen = encoder.get("kind", "bilstm") == "transformer"
        self.convolutions = None if encoder.get("kind", "bilstm") != "cnn" else {
            "width": int(encoder.get("conv_width", 256)), "depth": int(encoder.get("conv_depth", 4)),
            "kernel": int(encoder.get("conv_kernel", 3)),
            "dilation": int(encoder.get("conv_dilation", 1))}
        if not (use_words or use_upos or transformer_chosen):
            raise ValueError("use_words=False and use_upos=False: the scorer would read nothing")
        for name, value in (("n_words", n_words), ("n_chars", n_chars), ("n_upos", n_upos)):
            if value < 3:
                raise ValueError(f"{name}={value}: a vocabulary holds at least PAD, UNK and ROOT")
        if n_rels < 0 or lstm_layers < 1 and not transformer_chosen:
            raise ValueError(
                f"n_rels={n_rels}, lstm_layers={lstm_layers}: need n_rels >= 0, lstm_layers >= 1"
            )
        for name, value in (("dropout", dropout), ("word_dropout", word_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value}: expected a probability in [0, 1)")
        self.n_words, self.n_chars, self.n_upos, self.n_rels = n_words, n_chars, n_upos, n_rels
        self.use_upos = use_upos
        self.word_dropout = word_dropout

        self.transformer = None
        if transformer_chosen:
            self.transformer = TransformerEncoder(
                name=encoder.get("name"), char_tokens=char_tokens,
                pooling=encoder.get("pooling", "first"), window=int(encoder.get("window", 512)),
                overlap=int(encoder.get("overlap", 128)), finetune=bool(encoder.get("finetune", False)),
                lr=float(encoder.get("lr", 5e-5)), warmup_steps=int(encoder.get("warmup_steps", 1000)),
                cache=bool(encoder.get("cache", True)),
            )
            use_words = bool(encoder.get("use_chars", False))
            lstm_layers = int(encoder.get("lstm_layers", 0))
            dropout_features = float(encoder.get("dropout", 0.2))
            # restored without the model folder: sized from the checkpoint's files on load
            self.register_load_state_dict_pre_hook(_restore_transformer)
        self.use_words = use_words
        self.sizes = {"word_dim": word_dim, "char_dim": char_dim, "char_hidden": char_hidden,
                      "upos_dim": upos_dim, "lstm_hidden": lstm_hidden, "lstm_layers": lstm_layers,
                      "arc_mlp": arc_mlp, "rel_mlp": rel_mlp, "dropout": dropout, "n_tags": n_tags}
        self.layer_sizes = dict(layer_sizes or {})
        self.layer_classes = {name: list(tokens) for name, tokens in (layer_classes or {}).items()}
        self.layer_inputs = tuple(str(name) for name in layer_inputs)
        heads = [*self.layer_sizes, *([UPOS_FED] if n_tags > 0 else [])]
        unknown = [name for name in self.layer_inputs if name not in heads]
        if unknown:
            raise ValueError(f"model.layer_inputs {unknown}: the scorer has no head for them "
                             f"(its heads: {sorted(heads)})")
        if self.layer_inputs and (self.convolutions is not None or lstm_layers < 2):
            where = ("model/encoder=cnn has no BiLSTM" if self.convolutions is not None else
                     f"the BiLSTM has {lstm_layers} layer(s)" + (
                         " (model.encoder.lstm_layers over the transformer)" if transformer_chosen else
                         " (model.lstm_layers)"))
            raise NotImplementedError(
                f"model.layer_inputs={list(self.layer_inputs)}: the tags feed the BiLSTM layers above "
                f"the first, and {where}; use at least 2 BiLSTM layers or model.layer_inputs=[]")
        self.vectors = None
        if vectors is not None and vectors.get("path"):
            if not use_words:
                raise NotImplementedError(
                    "model.vectors are added to the word embeddings: use them with "
                    "model.use_words=true (a transformer encoder: model.encoder.use_chars=true)")
            if n_vectors < 3:
                raise ValueError(f"model.vectors.path={vectors['path']}: the vocabularies hold no "
                                 "vector rows (a parser or teacher trained without vectors?)")
            self.vectors = {"n_rows": n_vectors, "dim": vector_dim,
                            "finetune": bool(vectors.get("finetune", False)), "rows": vector_rows}
        self.feature_dropout = nn.Dropout(dropout_features if self.transformer is not None else 0.0)
        self._build_layers()

    def _build_layers(self) -> None:
        """Every layer after the transformer (whose width they depend on)."""
        z = self.sizes
        dropout = z["dropout"]
        self.word_embed, self.char_encoder = None, None
        if self.use_words:
            self.word_embed = nn.Embedding(self.n_words, z["word_dim"], padding_idx=0)
            self.char_encoder = CharLSTM(
                self.n_chars, char_dim=z["char_dim"], hidden=z["char_hidden"], n_out=z["word_dim"]
            )
        self.word_vectors = None
        if self.vectors is not None:
            self.word_vectors = WordVectors(**self.vectors, n_out=z["word_dim"])
            self.vectors["rows"] = None  # held by the module now (a rebuild reads the checkpoint)
        self.upos_embed = nn.Embedding(self.n_upos, z["upos_dim"], padding_idx=0) if self.use_upos else None
        n_input = ((z["word_dim"] if self.use_words else 0) + (z["upos_dim"] if self.use_upos else 0)
                   + (self.transformer.n_out if self.transformer is not None else 0))
        if n_input == 0:
            raise ValueError("the scorer would read nothing: no words, no UPOS, no transformer")
        self.input_dropout = nn.Dropout(dropout)
        self.lstm = self.conv = None
        # model.layer_inputs: the first BiLSTM layer, its states' heads and the tags' embeddings
        self.lower_lstm = self.tag_inputs = None
        n_states = n_input
        if self.convolutions is not None:
            self.conv = ConvEncoder(n_input, **self.convolutions, dropout=z["dropout"])
            n_states = self.conv.hidden_size
        elif self.layer_inputs:
            n_lower = 2 * z["lstm_hidden"]
            self.lower_lstm = BiLSTM(n_input, z["lstm_hidden"], num_layers=1, dropout=dropout)
            classes = {**self.layer_sizes, UPOS_FED: z["n_tags"]}
            self.tag_inputs = nn.ModuleDict({
                name: nn.Embedding(classes[name], z["upos_dim"], padding_idx=0)
                for name in self.layer_inputs})
            self.lstm = BiLSTM(n_lower + len(self.layer_inputs) * z["upos_dim"], z["lstm_hidden"],
                               num_layers=z["lstm_layers"] - 1, dropout=dropout)
            n_states = 2 * z["lstm_hidden"]
        elif z["lstm_layers"] > 0:
            self.lstm = BiLSTM(n_input, z["lstm_hidden"], num_layers=z["lstm_layers"], dropout=dropout)
            n_states = 2 * z["lstm_hidden"]
        self.lstm_dropout = nn.Dropout(dropout)
        self.arc_dep = MLP(n_states, z["arc_mlp"], dropout=dropout)
        self.arc_head = MLP(n_states, z["arc_mlp"], dropout=dropout)
        self.arc = Biaffine(z["arc_mlp"])
        if self.n_rels > 0:
            self.rel_dep = MLP(n_states, z["rel_mlp"], dropout=dropout)
            self.rel_head = MLP(n_states, z["rel_mlp"], dropout=dropout)
            self.rel = Bilinear(z["rel_mlp"], self.n_rels)
        self.tagger = nn.Linear(n_states, z["n_tags"]) if z["n_tags"] > 0 else None
        self.layer_heads = nn.ModuleDict({
            name: layer_of(name).head(n_states, size, self.layer_classes.get(name))
            for name, size in self.layer_sizes.items()})

    def forward(self, batch: Batch, *, layers: bool = True, label_grid: bool = True) -> EdgeScores:
        """arcs ``[B, dep, head]``; labels ``[B, dep, head, L]`` or ``None``; ``layers``: False
        leaves the token-level layers' heads out (a caller that reads only the trees);
        ``label_grid``: False scores labels on the arcs a caller asks for only
        (``EdgeScores.label_at``) instead of on every (dependent, head) pair."""
        check_batch(batch, n_words=self.n_words, n_upos=self.n_upos, n_chars=self.n_chars)
        words, lengths = batch.words, batch.lengths
        width = words.shape[1]
        present = torch.arange(width, device=words.device) <= lengths[:, None]  # ROOT and words
        inputs = []
        if self.transformer is not None:
            inputs.append(self.feature_dropout(self.transformer(batch.chars, lengths)))
        if self.word_embed is not None and self.char_encoder is not None:
            vector_ids = batch.vectors
            if self.training and self.word_dropout > 0:
                # a new tensor: the caller's batch is untouched
                dropped = dropped_words(batch.word_mask, self.word_dropout)
                words = words.masked_fill(dropped, UNK)
                if self.word_vectors is not None and vector_ids is not None:
                    vector_ids = vector_ids.masked_fill(dropped, UNK)
            embedded = self.word_embed(words) + self.char_encoder(batch.chars, present)
            if self.word_vectors is not None:
                embedded = embedded + self.word_vectors(vector_ids)
            inputs.append(embedded)
        if self.upos_embed is not None:
            inputs.append(self.upos_embed(batch.upos))
        x = torch.cat(inputs, dim=-1)
        context = self.lstm if self.lstm is not None else self.conv
        fed = {}
        if self.lower_lstm is not None:
            x, fed = self._tags_fed(self.input_dropout(x), lengths, present)
            states, _ = self.lstm(x, lengths + 1)
            states = self.lstm_dropout(states)
        elif context is not None:
            states, _ = context(self.input_dropout(x), lengths + 1)  # ROOT and the words
            states = self.lstm_dropout(states)  # [B, N+1, 2 * lstm_hidden], zero beyond lengths
        else:
            states = self.input_dropout(x)

        arcs = self.arc(self.arc_dep(states), self.arc_head(states))
        labels = label_at = None
        if self.n_rels > 0:
            rel_dep, rel_head = self.rel_dep(states), self.rel_head(states)
            if label_grid:
                labels = self.rel(rel_dep, rel_head)
            else:
                label_at = self.rel.at(rel_dep, rel_head)
        tags = (fed.pop(UPOS_FED) if UPOS_FED in fed else
                self.tagger(states) if self.tagger is not None else None)
        # Prediction reads a few classes of each word through the layers' dictionaries: computed there.
        lazy = not (self.training or torch.is_grad_enabled())
        columns = {name: fed[name] if name in fed else LinearScores(head, states) if lazy else head(states)
                   for name, head in self.layer_heads.items()} if layers else {}
        return EdgeScores(arcs=arcs, labels=labels, tags=tags, layers=columns, label_at=label_at)

    def _tags_fed(self, x: Tensor, lengths: Tensor, present: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """``x [B, N+1, n_input]`` (dropped out) through the first BiLSTM layer; the input of the
        layers above (``[B, N+1, 2 * lstm_hidden + len(layer_inputs) * upos_dim]``: its states
        and the embeddings of each fed layer's predicted classes) and those layers' scores ``{name:
        [B, N+1, C]}``. The classes are the heads' argmax (:meth:`TokenLayer.predict`), detached,
        ROOT at 0 and PAD beyond each length: the model's own, never the batch's."""
        lower, _ = self.lower_lstm(x, lengths + 1)
        lower = self.lstm_dropout(lower)
        parts, scores = [lower], {}
        for name, embed in self.tag_inputs.items():
            if name == UPOS_FED:
                scores[name], column = self.tagger(lower), UPOS_COLUMN
            else:
                scores[name], column = self.layer_heads[name](lower), layer_of(name)
            best = column.predict(scores[name].detach())
            ids = torch.where(present, best, PAD)
            ids[:, 0] = ROOT
            parts.append(self.input_dropout(embed(ids)))
        return torch.cat(parts, dim=-1), scores


def _restore_transformer(module: BiaffineScorer, state_dict: dict, prefix: str, *args: Any) -> None:
    # A scorer built where its transformer could not be loaded (no folder, no network) has
    # placeholder layers: the checkpoint's stored config and tokenizer rebuild the transformer,
    # then the layers after it at its width, before their weights are read.
    key = f"{prefix}transformer._extra_state"
    if module.transformer is not None and not module.transformer.loaded and key in state_dict:
        module.transformer.set_extra_state(state_dict[key])
        module._build_layers()
