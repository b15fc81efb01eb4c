"""Typed schemas for every Hydra config group, registered in Hydra's ConfigStore.

``configs/config.yaml`` starts its defaults list with ``base_config`` (the :class:`Config` schema
below), so every group file and every command-line override is merged into a typed node: a misspelt
key or a value of the wrong type fails when the config is composed, not an hour into a run.

Closed choices are enums (a typo such as ``optim.name=adamm`` also fails at composition); open
ones (a device string, a path) are plain strings checked when the run starts.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf

__all__ = [
    "Average",
    "Config",
    "CorpusFormat",
    "DataConfig",
    "Decay",
    "Distributed",
    "EncoderConfig",
    "EncoderKind",
    "LabelMode",
    "LoggerConfig",
    "ModelConfig",
    "ObjectiveConfig",
    "OnInvalid",
    "OptimConfig",
    "OptimName",
    "Pooling",
    "ScorerKind",
    "TrainerConfig",
    "UnknownKeyError",
    "UposInput",
    "VectorsConfig",
    "check_known_keys",
    "config_dir",
    "dotted_keys",
    "register_configs",
    "unknown_option",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
# the config tree ships inside the package (pyproject.toml's package-data; docs/layout.md)
PACKAGE_CONFIGS = Path(__file__).resolve().parent / "configs"


class OnInvalid(str, Enum):
    error = "error"
    skip = "skip"


class CorpusFormat(str, Enum):
    auto = "auto"  # CoNLL-U by name (.conllu), else raw with data.unlabeled_tokenizer, else tokenised
    raw = "raw"  # one paragraph per line, split by data.unlabeled_tokenizer
    tokenised = "tokenised"  # one sentence per line, words split on whitespace
    conllu = "conllu"


class ScorerKind(str, Enum):
    biaffine = "biaffine"
    loglinear = "loglinear"


class EncoderKind(str, Enum):
    bilstm = "bilstm"  # word + character embeddings into the scorer's BiLSTM (Dozat & Manning)
    transformer = "transformer"  # a pretrained Hugging Face encoder (parser.models.transformer)
    cnn = "cnn"  # word + character embeddings into residual convolutions (a lean student, issue 47)


class Pooling(str, Enum):
    first = "first"  # a word is its first subword
    mean = "mean"  # a word is the mean of its subwords


class UposInput(str, Enum):
    gold = "gold"  # the batch's UPOS column (gold, or a separate tagger's) is embedded as input
    predicted = "predicted"  # no UPOS input; decoding, GE and the output read the tag head's tags
    none = "none"  # no UPOS input and no tags read from the data


class LabelMode(str, Enum):
    classifier = "classifier"  # Dozat & Manning: labels from a classifier on the arcs
    joint = "joint"  # labeled tree CRF over (head, label) pairs


class Distributed(str, Enum):
    auto = "auto"
    off = "off"
    on = "on"


class OptimName(str, Enum):
    adam = "adam"
    adamw = "adamw"


class Average(str, Enum):
    ema = "ema"  # exponential moving average of the weights, bias-corrected
    uniform = "uniform"  # the mean of the weights after every step (averaged perceptron)


class Decay(str, Enum):
    none = "none"
    linear = "linear"
    cosine = "cosine"
    exponential = "exponential"  # lr * gamma ** (step / decay_steps), Dozat & Manning style


@dataclass
class DataConfig:
    """Where the sentences come from and how they are batched.

    ``root`` null falls back to ``$UD_ROOT``, then ``<repo>/data/ud``. ``treebank`` is a code
    (``hu_szeged``) or an official folder name (``UD_Hungarian-Szeged``) under the root, in either
    layout (docs/treebanks.md); what the run needs to know about it is read from its files. A
    ``*_file`` path, when set, replaces that split's file; a null split is not read. The default
    ``dev_split`` of a treebank with no dev file: the last ``dev_fraction`` of the training
    sentences (none when that is under 20: no model selection, the last step's model is kept).
    """

    treebank: str = "en_ewt"
    root: str | None = None
    train_split: str | None = "train"
    dev_split: str | None = "dev"
    test_split: str | None = "test"
    dev_fraction: float = 0.1
    train_file: str | None = None
    dev_file: str | None = None
    test_file: str | None = None
    on_invalid: OnInvalid = OnInvalid.error
    min_freq: int = 2
    tokens_per_batch: int = 5000
    eval_tokens_per_batch: int = 10000
    max_length: int = 100  # training sentences longer than this are skipped (counted)
    max_train_sentences: int | None = None  # first n training sentences, for quick runs
    # Semi-supervised data flow: a labeled subset of the training file, the rest as unlabeled text.
    labeled_size: int | None = None
    labeled_fraction: float | None = None
    # The learning curve in unlabeled text: a seeded subset of the in-memory unlabeled text (the
    # training file's part and unlabeled_file), nested across sizes, taken after the vocabulary is
    # built (so one teacher serves every size).
    unlabeled_size: int | None = None
    unlabeled_file: str | None = None  # CoNLL-U or one tokenised sentence per line
    unlabeled_ratio: float = 1.0  # unlabeled batches per labeled batch
    # A corpus streamed from disk, never held whole (docs/corpora.md): a file or a folder of
    # shards, plain/.gz/.xz; a bounded shuffle buffer; bad records skipped up to a share.
    unlabeled_corpus: str | None = None
    unlabeled_format: CorpusFormat = CorpusFormat.auto
    unlabeled_tokenizer: str | None = None  # tokenizer checkpoint or pipeline file (raw text)
    shuffle_buffer: int = 10000  # sentences
    max_bad_share: float = 0.01  # of the records read (at least 1000) before the run stops
    max_sentence_words: int = 500  # a longer corpus sentence is a bad record
    subset_seed: int = 0  # which sentences form the labeled subset (nested across sizes)
    # Choices the files cannot make, set by configs/data/<treebank>.yaml where they differ and
    # read by the experiment families (``train_split: ${data.unlabeled_split}``): the split whose
    # sentences, trees removed, are the unlabeled text of a run without trees (dev or, transductive,
    # test for a treebank without a train file: named explicitly so the results footnote it), and
    # the training sentence length cap of the small CPU-sized families (higher where sentences
    # are long).
    unlabeled_split: str = "train"
    short_max_length: int = 60
    # Predicted UPOS for the unlabeled text: a tagger checkpoint (parser.tagger) tags the words
    # whose UPOS is '_' (a tokenised text file: every word); retag_unlabeled replaces the given
    # UPOS of the unlabeled part too (the "predicted tags" setting on a treebank with gold tags).
    tagger: str | None = None
    retag_unlabeled: bool = False
    # The training file may hold partial trees (docs/annotation.md): HEAD '_' is an unannotated
    # word (-1: the likelihood sums over its heads), DEPREL '_' under a given HEAD an unannotated
    # relation, and in a parser-select annotation file only the '# selected_words' are annotation.
    # Sentences with no head at all become unlabeled text. False: every HEAD must be given.
    partial_trees: bool = False
    # The columns besides HEAD and DEPREL that annotators filled for an annotation file's
    # asked-for words (LEMMA, UPOS, XPOS, FEATS): training targets there. The others, and every
    # column of the words nobody was asked for, hold the pool's or the parser's values: never
    # targets. [] (default): only the trees were annotated.
    annotated_columns: list[str] = field(default_factory=list)


@dataclass
class EncoderConfig:
    """What turns the words into the vectors the biaffine scorer projects
    (``configs/model/encoder/<kind>.yaml``; ``model/encoder=transformer`` on the command line).

    ``bilstm``: the biaffine scorer's own word/character embeddings and BiLSTM (the ``model.*``
    sizes); the other fields are not read. ``transformer``: ``name`` (a Hugging Face hub name or
    a local folder) read with ``AutoModel``/``AutoTokenizer`` (the optional extra
    ``.[transformers]``); words pooled from their subwords (``pooling``), sentences longer than
    ``window`` subwords split into windows overlapping by ``overlap``; a learned scalar mix of the
    hidden states; ``finetune`` trains it at ``lr`` (warm-up ``warmup_steps``), else it is frozen
    and, with ``cache``, each sentence's features are computed once. ``lstm_layers`` > 0 puts the
    scorer's BiLSTM (``model.lstm_hidden``) on top; ``use_chars`` adds the word and character
    embeddings to its input.
    """

    kind: EncoderKind = EncoderKind.bilstm
    name: str | None = None
    pooling: Pooling = Pooling.first
    window: int = 512  # subwords per window, special tokens included
    overlap: int = 128  # subwords shared by consecutive windows
    finetune: bool = False
    lr: float = 5e-5
    warmup_steps: int = 1000
    cache: bool = True  # frozen only: features of a sentence computed once per process
    dropout: float = 0.2  # on the mixed features
    lstm_layers: int = 0
    # cnn: residual convolutions instead of the BiLSTM (parser.models.layers.ConvEncoder)
    conv_width: int = 256
    conv_depth: int = 4
    conv_kernel: int = 3  # words per window (odd)
    conv_dilation: int = 1  # block k's window spaces its words conv_dilation**k apart
    use_chars: bool = False


@dataclass
class VectorsConfig:
    """Pretrained word vectors a user brings (``model.vectors.path=<file>``, docs/vectors.md):
    word2vec/fastText text (``.vec``, ``.txt``; ``.gz``/``.bz2``/``.xz``) or a fastText ``.bin``,
    read when a run starts (:mod:`parser.data.vectors`): the first ``max_rows`` rows and those of
    the training words (or their lowercased forms). The rows kept and their words are stored in
    the checkpoint: prediction reads no vectors file. Each word's row (UNK: zero) goes through
    a trained linear map to ``model.word_dim`` and is added to its word and character
    embeddings; ``finetune`` false keeps the rows as read, true trains them too. null: none.
    """

    path: str | None = None
    max_rows: int = 200000
    finetune: bool = False


@dataclass
class ModelConfig:
    """The edge scorer and how its scores become a tree CRF.

    Only the options the chosen scorer accepts (``parser.models.scorer_options(kind)``) are passed
    to it: biaffine fields are ignored by the log-linear scorer and vice versa.
    """

    kind: ScorerKind = ScorerKind.biaffine
    labels: LabelMode = LabelMode.classifier
    single_root: bool = True
    # Decoding: the best projective tree (Eisner) instead of the maximum spanning tree. Training
    # and every expectation stay non-projective; parser-evaluate / parser-predict projective=... override.
    projective: bool = False
    # The tree distribution trained and decoded: matrix_tree (non-projective, parser.structs.TreeCRF)
    # or projective (Eisner's inside algorithm, parser.structs.ProjectiveTreeCRF; labels: classifier;
    # labeled training trees that are not projective are left out, with a warning that counts them).
    crf: str = "matrix_tree"
    # After decoding, re-attach the words of these UPOS by the UD punct/cc guidelines (to the unit
    # they separate: parser.structs.attach_to_units), e.g. [PUNCT, CCONJ]; [] = as decoded.
    attach_to_units: list[str] = field(default_factory=list)
    # Prediction-time UD validity (parser.models.ud_rules): root iff head 0, left_to_right
    # relations, one_subject / one_object per head, punct (PUNCT <-> punct, no crossing); [] =
    # none. Relations a treebank lacks are skipped, so the rules apply to UD relation sets only.
    # parser-predict / parser-evaluate ud_rules=... override.
    ud_rules: list[str] = field(
        default_factory=lambda: ["root", "left_to_right", "one_subject", "one_object", "punct"])
    # Prediction scores each word's labels on its decoded arc only (and on the arcs confidence,
    # k-best trees and samples ask for: ParserOutput.label_at), not on every (dependent, head)
    # pair; false needs labels: classifier. The UD label masks then apply on those arcs and leave
    # the arc scores as they are (the grid's classifier takes disallowed relations' mass out of
    # each arc). Training scores the grid either way. parser-predict label_grid=... overrides.
    label_grid: bool = True
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    # pretrained word vectors added to the word input (docs/vectors.md); path null: none
    vectors: VectorsConfig = field(default_factory=VectorsConfig)
    # Tags: ``upos_input`` gold embeds the data's UPOS column (needs gold or tagger tags at test
    # time); predicted and none read no tag column. ``tag_loss_weight`` > 0 adds a UPOS head on
    # the encoder, trained on the labeled batches (multi-task); its tags replace the data's for
    # decoding (attach_to_units), GE constraints and parser-predict (predicted needs the head).
    upos_input: UposInput = UposInput.gold
    tag_loss_weight: float = 0.0
    # Token-level layers predicted beside the tree (parser.data.layers: xpos, feats, lemma, ...),
    # each a softmax head on the encoder states trained with the parser on the labeled batches,
    # its loss weighted by layer_weights.<name>, else layer_weight; at most layer_max_classes classes
    # each (the most frequent; the others are never predicted, and the run says so). A layer
    # whose column is '_' on every training word is left out (one log line). [] here: a stored
    # config without the key (a checkpoint from before layers) predicts none; the biaffine model
    # group turns them on.
    layers: list[str] = field(default_factory=list)
    layer_weight: float = 1.0
    layer_weights: dict[str, float] = field(default_factory=dict)
    layer_max_classes: int = 1000
    # Layers (of ``layers``, and ``upos``: the UPOS head, with upos_input=predicted and
    # tag_loss_weight > 0) whose predicted class feeds the parser, as UDPipe 2's tags do: their
    # heads read the first BiLSTM layer's states, and the embeddings (upos_dim wide) of their
    # argmax classes (never the data's column, in training as in prediction) join those states
    # as the input of the BiLSTM layers above, which the arc and label MLPs read (docs/layout.md,
    # "Tags fed to the parser"). Needs a BiLSTM of >= 2 layers (model.lstm_layers, or
    # model.encoder.lstm_layers over a transformer). [] : none (every model before the key).
    layer_inputs: list[str] = field(default_factory=list)
    # Warm start: the weights and vocabularies of this parser checkpoint (a run's best.pt), trained
    # further on this run's data (a word new to it reads as UNK, its characters still count). The
    # model options must build the checkpoint's shapes. Unlike trainer.resume, the step,
    # optimiser, schedule and early stopping start afresh: active learning's next round.
    init: str | None = None
    # biaffine (Dozat & Manning 2017); use_words=False: the BiLSTM reads UPOS alone
    use_upos: bool = True
    use_words: bool = True
    word_dim: int = 100
    char_dim: int = 50
    char_hidden: int = 100
    upos_dim: int = 100
    lstm_hidden: int = 400
    lstm_layers: int = 3
    arc_mlp: int = 500
    rel_mlp: int = 100
    dropout: float = 0.33
    word_dropout: float = 0.25
    # log-linear (McDonald et al. 2005): hashed weight tables
    n_buckets: int = 4194304  # 2**22
    n_label_buckets: int = 1048576  # 2**20
    # lexical=False: UPOS/direction/distance templates only; distance_prior: a fixed
    # -s log|dep - head| score on word-word arcs (a short-arc bias, e.g. for GE alone)
    lexical: bool = True
    distance_prior: float = 0.0
    # UPOS names (e.g. [PUNCT]) whose dependents get no distance prior: punctuation attaches to
    # its clause's head by convention, which dependency-length minimisation does not describe
    distance_prior_exempt: list[str] = field(default_factory=list)


@dataclass
class ObjectiveConfig:
    """A weighted sum of objective terms, handed to ``parser.objectives.build_objective``.

    ``terms`` maps a term's name to its options (``type``, ``weight``, ``warmup``, ``stream`` and
    the kind's own; see ``parser.objectives.build``). A ``ge`` term's ``constraints`` (default
    ``ud_universal``) and ``top_k``, and a ``kl`` term's ``checkpoint`` (the teacher), are loaded
    by the trainer. Empty here so that a group file's terms are the only ones.
    """

    terms: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimConfig:
    name: OptimName = OptimName.adamw
    lr: float = 2e-3
    betas: list[float] = field(default_factory=lambda: [0.9, 0.9])
    eps: float = 1e-12
    weight_decay: float = 0.0
    warmup_steps: int = 0  # linear warm-up from 0 to lr
    decay: Decay = Decay.exponential
    decay_rate: float = 0.75  # exponential: multiply lr by this every decay_steps
    decay_steps: int = 5000
    clip_norm: float = 5.0  # gradient norm clipping; <= 0 disables
    # Dev evaluation and checkpoints use averaged weights (parser.train.averaging); null: raw.
    average: Average | None = None
    ema_decay: float = 0.999


@dataclass
class TrainerConfig:
    seed: int = 1
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    num_threads: int | None = None  # torch intra-op CPU threads; null: torch's default
    max_steps: int = 50000
    max_epochs: int | None = None
    max_minutes: float | None = None  # wall-clock budget of this process's training; null: none
    eval_every: int = 500  # steps between dev evaluations
    patience: int | None = 10  # dev evaluations without LAS gain before stopping; null: never
    resume: str | None = None  # a checkpoint path, or "last" (this run directory's latest)
    checkpoint_dir: str | None = None  # null: <run dir>/checkpoints
    keep_last: int = 2  # periodic checkpoints kept besides best.pt
    max_nonfinite: int = 5  # stop after this many non-finite steps in a row
    log_every: int = 10  # steps between TensorBoard scalar writes
    progress: bool = True  # tqdm progress bar, where stderr is a terminal
    final_eval: bool = True  # evaluate best checkpoint on dev/test, write predictions + JSON
    deterministic: bool = False  # torch.use_deterministic_algorithms
    # signals that stop training at the next step with a checkpoint and exit status 75
    # (parser.train.preemption); [] : their usual effect
    preempt_signals: list[str] = field(default_factory=lambda: ["SIGTERM", "SIGUSR1"])
    # auto: DDP when launched by torchrun with several processes; on: require it; off: one process
    distributed: Distributed = Distributed.auto


@dataclass
class LoggerConfig:
    tensorboard: bool = True
    log_dir: str = "tb"  # relative to the run directory
    arc_entropy: bool = True  # log mean arc entropy of the training batches
    flush_secs: int = 30


@dataclass
class Config:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    # The experiment family (configs/experiment/<family>.yaml) that set this config; with the
    # treebank it names the run (``name: ${family}/${data.treebank}``) and its output folder.
    family: str = "run"
    name: str = "run"  # a label for the run (hparams, metrics JSON)


def check_known_keys(cfg: DictConfig) -> None:
    """Raise :class:`UnknownKeyError` for the first key of ``cfg`` that its schema lacks.

    A typed node rejects an unknown key on a plain override (``trainer.max_step=10``), but Hydra's
    ``+``/``++`` adds it anyway (by design: they force the addition into a structured config), so
    ``+trainer.max_step=10`` would compose and be silently ignored by the trainer. Open nodes
    (``objective.terms``: each term's options are checked by the objective builder) are skipped.

    >>> register_configs()
    >>> cfg = OmegaConf.structured(Config)
    >>> OmegaConf.update(cfg, "trainer.max_step", 10, force_add=True)
    >>> check_known_keys(cfg)
    Traceback (most recent call last):
    ...
    parser.config.UnknownKeyError: unknown option 'trainer.max_step'; did you mean 'trainer.max_steps'?
    """
    unknown = _unknown_keys(cfg, path="")
    if unknown:
        raise UnknownKeyError(unknown[0], [key for key in dotted_keys(cfg) if key not in unknown])


def _unknown_keys(cfg: DictConfig, *, path: str) -> list[str]:
    """The dotted keys under ``cfg`` (at ``path``) that no schema field holds; a whole unknown
    node is named by its leaves (``+trainr.max_steps=1``: ``trainr.max_steps``)."""
    fields = getattr(OmegaConf.get_type(cfg), "__dataclass_fields__", None)
    if fields is None:
        return []  # an open node
    unknown = []
    for key in cfg:
        dotted = f"{path}.{key}" if path else str(key)
        child = cfg._get_node(key)
        if path == "" and key == "hydra":
            continue  # Hydra's own node (present in a job's config), typed by Hydra
        if key not in fields:
            unknown += dotted_keys(child, path=dotted) if isinstance(child, DictConfig) else [dotted]
        elif isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            unknown += _unknown_keys(child, path=dotted)
    return unknown


def dotted_keys(cfg: DictConfig, *, path: str = "") -> list[str]:
    """Every leaf of ``cfg`` as a dotted key (``trainer.max_steps``), interpolations unresolved.

    >>> dotted_keys(OmegaConf.create({"a": {"b": 1, "c": {}}, "d": "${a.b}"}))
    ['a.b', 'a.c', 'd']
    """
    keys = []
    for key in cfg:
        dotted = f"{path}.{key}" if path else str(key)
        child = cfg._get_node(key)
        if isinstance(child, DictConfig) and not child._is_missing() and not child._is_none() and len(child):
            keys += dotted_keys(child, path=dotted)
        else:
            keys.append(dotted)
    return keys


def unknown_option(key: str, known: Iterable[str]) -> str:
    """The one text of every command for an option it does not have (``parser-train`` and the
    ``key=value`` tools alike): the likely intended option first, found by difflib among the
    ``known`` dotted keys.

    >>> unknown_option("trainer.max_step", ["trainer.max_steps", "trainer.seed"])
    "unknown option 'trainer.max_step'; did you mean 'trainer.max_steps'?"
    >>> unknown_option("zzz", ["checkpoint"])
    "unknown option 'zzz'"
    """
    close = difflib.get_close_matches(key, list(known), n=1)
    return f"unknown option {key!r}" + (f"; did you mean {close[0]!r}?" if close else "")


class UnknownKeyError(ConfigCompositionException):
    """A key that the config's schema lacks (``key``), with the config's own keys (``known``)."""

    def __init__(self, key: str, known: Iterable[str]) -> None:
        self.key, self.known = key, list(known)
        super().__init__(unknown_option(key, self.known))


def config_dir() -> Path:
    """The Hydra config tree: ``$PARSER_CONFIG_DIR`` when set, else the package's own
    ``parser/configs/`` (package data: inside an installed wheel, the wheel's copy; in an
    editable install, the checkout's, which the top-level ``configs`` link points to)."""
    configured = os.environ.get("PARSER_CONFIG_DIR")
    candidates = [Path(configured).expanduser()] if configured else []
    candidates.append(PACKAGE_CONFIGS)
    for candidate in candidates:
        if (candidate / "config.yaml").is_file():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(
        f"Hydra configs not found (looked for config.yaml in {tried}); set PARSER_CONFIG_DIR"
    )


def register_configs() -> None:
    """Store the schemas (idempotent), the ``repo_root`` resolver used by the tiny data config,
    the ``parser_configs`` resolver (:func:`config_dir`) and the ``term_names`` resolver used by
    the sweeps' folder names."""
    ConfigStore.instance().store(name="base_config", node=Config)
    if not OmegaConf.has_resolver("repo_root"):
        OmegaConf.register_new_resolver("repo_root", lambda: str(REPO_ROOT))
    if not OmegaConf.has_resolver("parser_configs"):
        # the tagger's and tokenizer's trees find the shared groups through it (hydra.searchpath)
        OmegaConf.register_new_resolver("parser_configs", lambda: str(config_dir()))
    if not OmegaConf.has_resolver("term_names"):
        # ``${term_names:${objective.terms}}`` -> ``likelihood+entropy``: a sweep's arm folder.
        OmegaConf.register_new_resolver("term_names", lambda terms: "+".join(terms))


register_configs()
