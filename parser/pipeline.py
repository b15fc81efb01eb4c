"""The Python API: raw text (or pre-tokenised sentences) -> dependency trees, from one pipeline file.

>>> from parser import Pipeline                                # doctest: +SKIP
>>> nlp = Pipeline.load("model.pipeline")                      # doctest: +SKIP
>>> [sentence] = nlp.parse("I can't go.")                      # doctest: +SKIP
>>> [(t["form"], t["upos"], t["head"], t["deprel"]) for t in sentence]  # doctest: +SKIP

A pipeline file (``parser-pipeline build``, :mod:`parser.cli.pipeline`) holds the tokenizer and
sentence splitter (:mod:`parser.tokenize`), the parser, and the UPOS tagger when the parser reads
tags, with their vocabularies, configs and the scores they reached; a model card (markdown) is
written beside it.

Results are ``conllu.TokenList`` objects (the ``conllu`` package's type) with FORM, UPOS, HEAD and
DEPREL filled; raw text also gets multiword token lines (``du`` -> ``de le``), ``SpaceAfter=No``
and ``# text``. :meth:`Pipeline.parse_file` streams: it holds ``chunk_sentences`` sentences at a
time, so memory stays flat however long the input.

Threads: a ``Pipeline`` is **not thread-safe** (the models' modes and torch's thread settings are
shared state). Use one ``Pipeline`` per thread (``Pipeline.load`` in each), or guard a shared one
with a ``threading.Lock``; both are tested.
"""

from __future__ import annotations

import io
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import conllu
import torch

from parser.data.conllu_io import Sentence
from parser.data.conllu_stream import stream_conllu
from parser.data.text_files import open_text
from parser.data.vocab import Vocabularies
from parser.inference import MAX_WORDS, Annotator, ParseCount, load_decoder, reads_upos
from parser.inference.fixed_arcs import ArcConstraints
from parser.inference.loading import parser_from_state, with_overrides
from parser.inference.options import PredictOptions
from parser.inference.predict import report_failures
from parser.models.parser_model import ParserModel
from parser.runtime.checkpoint import CheckpointError, load_checkpoint
from parser.runtime.device import bound_kernel_cache, resolve_device
from parser.runtime.io_atomic import atomic_write
from parser.runtime.user_files import input_file, output_file
from parser.tagger.model import Tagger
from parser.tagger.predict import KIND as TAGGER_KIND
from parser.tagger.predict import TrainedTagger, load_tagger
from parser.tokenize import (
    Token,
    TrainedTokenizer,
    iter_sentences,
    load_tokenizer,
    split_paragraphs,
    tokenizer_from_state,
)
from parser.tokenize.check import first_untokenised_line
from parser.tokenize.segment import to_sentence

__all__ = [
    "KIND", "Pipeline", "parse_raw_file", "parser_from_state", "read_paragraph_stream",
    "refuse_untokenised", "tagger_from_state",
]

KIND = "pipeline"
FORMATS = ("raw", "text", "conllu")  # Pipeline.parse_file's inputs

log = logging.getLogger(__name__)


def tagger_from_state(state: dict, *, where: str) -> TrainedTagger:
    if state.get("kind") != TAGGER_KIND:
        raise CheckpointError(f"{where}: kind {state.get('kind')!r}, not a UPOS tagger")
    model = Tagger(**state["hparams"])
    model.load_state_dict(state["model"])
    return TrainedTagger(model.eval(), Vocabularies.from_state_dict(state["vocabs"]))


def read_paragraph_stream(lines: Iterable[str]) -> Iterator[str]:
    """Paragraphs (blank-line separated, inner newlines kept as spaces) of a stream of lines."""
    block: list[str] = []
    for line in lines:
        if line.strip():
            block.append(line.strip())
        elif block:
            yield " ".join(block)
            block = []
    if block:
        yield " ".join(block)


class Pipeline:
    """Tokenizer + (tagger) + parser; see the module docstring. Build one with :meth:`load`."""

    def __init__(self, *, parser: tuple[ParserModel, Vocabularies, dict],
                 tokenizer: TrainedTokenizer | None = None, tagger: TrainedTagger | None = None,
                 device: str | torch.device = "cpu", batch_size: int = 5000,
                 chunk_sentences: int = 1000, meta: dict | None = None,
                 confidence: bool = False, max_words: int = MAX_WORDS,
                 options: PredictOptions | None = None) -> None:
        if batch_size < 1 or chunk_sentences < 1:
            raise ValueError(f"Pipeline: batch_size={batch_size} and chunk_sentences="
                             f"{chunk_sentences} must be >= 1")
        if options is None:
            options = PredictOptions(confidence=confidence, max_words=max_words)
        bound_kernel_cache()  # memory flat over long inputs (parser.runtime.device)
        self.device = resolve_device(str(device))
        self.model, self.vocabs, self.config = parser
        self.model.to(self.device)
        self.tokenizer, self.tagger = tokenizer, tagger
        if tokenizer is not None:
            tokenizer.model.to(self.device)
        if tagger is not None:
            tagger.model.to(self.device)
        if tagger is None and reads_upos(self.config):
            raise ValueError("Pipeline: the parser reads UPOS tags and no tagger was given")
        self.meta = dict(meta or {})
        # the default request: its confidence, max_words...; batch_size and chunk_sentences
        # are its tokens_per_batch and chunk_size
        self.options = options.replace(tokens_per_batch=batch_size, chunk_size=chunk_sentences)

    @property
    def batch_size(self) -> int:
        return self.options.tokens_per_batch

    @property
    def chunk_sentences(self) -> int:
        return self.options.chunk_size

    @property
    def confidence(self) -> bool:  # HeadProb/DeprelProb in MISC and tree comments
        return self.options.confidence

    @property
    def max_words(self) -> int:  # longer sentences are not parsed (# parse_error)
        return self.options.max_words

    @classmethod
    def load(cls, path: str | os.PathLike, options: PredictOptions | None = None, *,
             device: str = "cpu", batch_size: int | None = None,
             chunk_sentences: int | None = None, confidence: bool | None = None,
             projective: bool | None = None, attach_to_units: Sequence[str] | None = None,
             ud_rules: str | Sequence[str] | None = None, label_grid: bool | None = None,
             max_words: int | None = None) -> Pipeline:
        """The pipeline saved at ``path`` (``parser-pipeline build``) with ``options`` as its
        default request (:class:`~parser.inference.options.PredictOptions`; its decoder fields
        applied now). The keywords, where not None, replace fields of ``options``:
        ``batch_size`` (``tokens_per_batch``): words per parser batch; ``chunk_sentences``
        (``chunk_size``): sentences held at once by :meth:`parse_file`; ``confidence``: the tree
        CRF's marginals in MISC and comments (``parser-predict confidence=true``);
        ``projective``, ``attach_to_units``, ``ud_rules``, ``label_grid``: the parser's decoder
        overridden where not None (:func:`parser.inference.loading.with_overrides`);
        ``max_words``: longer sentences come back unparsed, with ``parse_error``. ``device`` is
        the models' (``options.device`` is not read here)."""
        changes = {"tokens_per_batch": batch_size, "chunk_size": chunk_sentences,
                   "confidence": confidence, "projective": projective,
                   "attach_to_units": attach_to_units, "ud_rules": ud_rules,
                   "label_grid": label_grid, "max_words": max_words}
        options = (options or PredictOptions()).replace(
            **{key: value for key, value in changes.items() if value is not None})
        state = load_checkpoint(path, map_location="cpu")
        if state.get("kind") != KIND:
            raise CheckpointError(f"{path}: kind {state.get('kind')!r}, not a pipeline file "
                                  "(parser-pipeline build writes one)")
        where = str(path)
        tokenizer = (tokenizer_from_state(state["tokenizer"], where=f"{where} (tokenizer)")
                     if state.get("tokenizer") else None)
        tagger = (tagger_from_state(state["tagger"], where=f"{where} (tagger)")
                  if state.get("tagger") else None)
        model, vocabs, config = parser_from_state(state["parser"], where=f"{where} (parser)")
        model.decoder = with_overrides(model.decoder, vocabs, **options.decoder())
        return cls(parser=(model, vocabs, config), tokenizer=tokenizer, tagger=tagger,
                   device=device, batch_size=options.tokens_per_batch,
                   chunk_sentences=options.chunk_size, meta=state.get("meta"), options=options)

    # --- input -> Sentence objects -------------------------------------------------------------

    def _raw_sentences(self, paragraphs: Iterable[str], *, path: str) -> Iterator[Sentence]:
        if self.tokenizer is None:
            raise ValueError(f"{path}: raw text needs a tokenizer and this pipeline has none; "
                             "give pre-tokenised sentences (lists of words)")
        return iter_sentences(self.tokenizer, paragraphs, path=path)

    @staticmethod
    def _tokenised(sentences: Iterable[Sequence[str]], *, path: str) -> Iterator[Sentence]:
        for number, words in enumerate(sentences, start=1):
            if isinstance(words, str) or not all(isinstance(w, str) and w and not any(
                    c.isspace() for c in w) for w in words):
                raise ValueError(f"{path}: sentence {number} must be a list of words (non-empty "
                                 f"strings without spaces); got {words!r:.80}")
            if not words:
                raise ValueError(f"{path}: sentence {number} is empty")
            tokens = [Token(w, True, (w,)) for w in words]
            yield to_sentence(tokens, sent_id=str(number), path=path, line=number)

    # --- Sentence objects -> parsed CoNLL-U (parser.inference.annotator) ---------------------

    def annotator(self, options: PredictOptions | None = None, *,
                  name: str = "<text>") -> Annotator:
        """The :class:`Annotator` of this pipeline's tagger and parser for ``options`` (None: the
        pipeline's own, :attr:`options`). The tagger fills every UPOS the input lacks. The
        decoder was set when the pipeline loaded: options whose decoder fields differ from it
        are refused."""
        options = self.options if options is None else options
        for field_name, value in options.decoder().items():
            if value is not None and value != getattr(self.options, field_name):
                raise ValueError(f"{field_name}={value}: the decoder is chosen when the pipeline "
                                 "loads (Pipeline.load(path, options)), not per request")
        return Annotator.of(self.model, self.vocabs, options, config=self.config,
                            tagger=self.tagger, device=self.device, name=name)

    def request(self, options: PredictOptions | None = None, **changes) -> PredictOptions:
        """``options`` (None: the pipeline's) with the ``changes`` that are not None: what
        :meth:`parse` and :meth:`parse_file` build from their keywords.

        >>> PredictOptions().replace(kbest=2).kbest
        2
        """
        options = self.options if options is None else options
        return options.replace(**{key: value for key, value in changes.items()
                                  if value is not None})

    @torch.no_grad()
    def parse(self, text: str | Sequence[Sequence[str]], options: PredictOptions | None = None,
              *, kbest: int | None = None, samples: int | None = None, seed: int | None = None,
              required: Sequence[Iterable[tuple[int, int]]] | None = None,
              forbidden: Sequence[Iterable[tuple[int, int]]] | None = None,
              ) -> list[conllu.TokenList]:
        """Parse raw text (``str``: paragraphs separated by blank lines, tokenised and split into
        sentences by the pipeline's tokenizer) or pre-tokenised sentences (a list of lists of
        words, parsed as given). One ``TokenList`` per sentence, or with these options (the tree
        CRF's; ``parser-predict`` has the same, :mod:`parser.inference.alternatives`):

        - ``kbest=K``: the K best trees of each sentence, K ``TokenList`` per sentence in one flat
          list, best first, with metadata ``tree_rank``, ``tree_prob`` and ``sent_id`` =
          ``<sentence number>/<rank>``;
        - ``samples=K, seed=S``: K sampled trees per sentence (metadata ``sample``, ``tree_prob``);
        - ``required`` / ``forbidden`` (pre-tokenised input only): per sentence, ``(dep, head)``
          word-id pairs (1-based, head 0 = ROOT) that every tree must contain / avoid. A
          sentence whose arcs admit no tree comes back unparsed with metadata ``parse_error``
          naming the words (and a logged warning); the others are parsed.

        Any sentence that cannot be parsed (over ``max_words``, a failed parse) comes back so too.
        ``options``: the whole request (:class:`~parser.inference.options.PredictOptions`;
        None: the pipeline's), the keywords above replacing its fields where given.
        """
        options = self.request(options, kbest=kbest, samples=samples, seed=seed)
        constraints = None
        if isinstance(text, str):
            if required is not None or forbidden is not None:
                raise ValueError("Pipeline.parse: required= / forbidden= name words, so they need "
                                 "pre-tokenised sentences (lists of words), not raw text")
            sentences = self._raw_sentences(split_paragraphs(text), path="<text>")
        else:
            text = list(text)
            constraints = _constraints(len(text), required=required, forbidden=forbidden)
            sentences = self._tokenised(text, path="<sentences>")
        annotator = self.annotator(options)
        return [tokens for part in annotator.stream(sentences, chunk_size=options.chunk_size,
                                                    constraints=constraints)
                for tokens in part.token_lists()]

    @torch.no_grad()
    def parse_file(self, input_path: str | os.PathLike, output_path: str | os.PathLike,
                   options: PredictOptions | None = None, *, format: str | None = None,
                   kbest: int | None = None, samples: int | None = None,
                   seed: int | None = None, keep_heads: str | None = None,
                   keep_columns: str | None = None) -> ParseCount:
        """Parse a UTF-8 file into CoNLL-U, streaming (``chunk_sentences`` at a time; the output
        replaces nothing until it is whole). ``format``: ``raw`` text (paragraphs separated by
        blank lines), ``text`` (one whitespace-tokenised sentence per line) or ``conllu``
        (``keep_heads="given"`` keeps its annotated heads, ``keep_columns="given"`` its LEMMA,
        UPOS, XPOS and FEATS where given); ``kbest``, ``samples``, ``seed``: as :meth:`parse`;
        ``options``: the whole request (None: the pipeline's; its ``format`` ``auto`` reads
        ``raw``), the keywords replacing its fields where given. Returns the number of sentences
        read, with ``failed``: those written unparsed with ``# parse_error``."""
        options = self.request(options, format=format, kbest=kbest, samples=samples, seed=seed,
                               keep_heads=keep_heads, keep_columns=keep_columns)
        format, keep_heads = options.format, options.keep_heads
        if format == "auto":
            format = "raw"
        if format not in FORMATS:
            raise ValueError(f"format={format!r}: expected one of {', '.join(FORMATS)}")
        if keep_heads != "none" and format != "conllu":
            raise ValueError(f"keep_heads={keep_heads}: keeps the heads of a CoNLL-U input; "
                             f"format={format} has none")
        input_path, output_path = Path(input_path), Path(output_path)
        if not input_path.is_file():
            raise ValueError(f"input={input_path}: no such file")
        if output_path.resolve() == input_path.resolve():
            raise ValueError(f"output={output_path}: is the input file")
        annotator = self.annotator(options, name=str(input_path))
        count = failed = 0
        with open_text(input_path) as source, atomic_write(output_path) as out:
            if format == "conllu":
                sentences = stream_conllu(input_path, require_trees=False,
                                          check_heads=keep_heads != "given")
            elif format == "text":
                lines = (line.split() for line in source)
                sentences = self._tokenised((w for w in lines if w), path=str(input_path))
            else:
                sentences = self._raw_sentences(read_paragraph_stream(source), path=str(input_path))
            for part in annotator.stream(sentences, chunk_size=options.chunk_size):
                out.writelines(part.blocks)
                count, failed = count + part.sentences, failed + part.failed
        report_failures(failed, count, name=str(input_path))
        return ParseCount(count, failed=failed)

    def to_conllu(self, sentences: Sequence[conllu.TokenList]) -> str:
        """The CoNLL-U text of parsed sentences."""
        buffer = io.StringIO()
        for sentence in sentences:
            buffer.write(sentence.serialize())
        return buffer.getvalue()


def _constraints(count: int, *, required, forbidden) -> list[ArcConstraints] | None:
    """One :class:`ArcConstraints` per sentence from ``required`` / ``forbidden`` (None: none)."""
    if required is None and forbidden is None:
        return None
    for name, given in (("required", required), ("forbidden", forbidden)):
        if given is not None and len(given) != count:
            raise ValueError(f"Pipeline.parse: {name}= has {len(given)} entries for {count} "
                             "sentences (one set of (dep, head) pairs per sentence)")
    return [ArcConstraints.of(required=required[i] if required is not None else (),
                              forbidden=forbidden[i] if forbidden is not None else ())
            for i in range(count)]


def refuse_untokenised(input_path: str | os.PathLike, *, format: str = "auto") -> None:
    """``ValueError`` naming the file, the line and the word when a text input of
    ``parser-predict`` (``format=text``, or ``auto`` on a file not ending in ``.conllu``) does not
    look whitespace-tokenised (:mod:`parser.tokenize.check`)."""
    path = Path(input_path)
    if format == "conllu" or (format == "auto" and path.suffix in (".conllu", ".conll")):
        return
    if not path.is_file():
        return  # the parser's own checks name a missing file
    found = first_untokenised_line(path)
    if found is not None:
        line, word = found
        raise ValueError(
            f"input={path}, line {line}: {word!r} looks like untokenised text (punctuation or a "
            "contraction glued to a word); the text input must be one whitespace-tokenised "
            "sentence per line. For raw text, pass tokenizer=<parser-train-tokenizer best.pt> "
            "(or a pipeline: Pipeline.parse_file)")


def parse_raw_file(checkpoint: str | os.PathLike, tokenizer: str | os.PathLike,
                   input_path: str | os.PathLike, output_path: str | os.PathLike,
                   options: PredictOptions | None = None, *,
                   tagger: str | os.PathLike | None = None) -> ParseCount:
    """``parser-predict tokenizer=...``: tokenise, split, tag (when the parser reads UPOS) and
    parse a raw text file with separate checkpoints, streaming, under ``options`` (its decoder
    fields override the checkpoint's; :meth:`Pipeline.parse_file`). Returns the sentences read
    (with ``failed``)."""
    options = (options or PredictOptions()).replace(format="raw")
    if options.keep_heads != "none":
        raise ValueError("keep_heads=given keeps the heads of a CoNLL-U input; raw text "
                         "(tokenizer=) has none")
    input_path = input_file(input_path, option="input")
    tokenizer = input_file(tokenizer, option="tokenizer")
    output_path = output_file(output_path, option="output", inputs=(
        input_path, checkpoint, tokenizer, *([tagger] if tagger else [])))
    torch_device = resolve_device(options.device)
    model, vocabs, config = load_decoder(checkpoint, device=torch_device, **options.decoder())
    if tagger is None and reads_upos(config):
        raise ValueError(f"checkpoint={checkpoint}: the parser reads UPOS tags; raw text needs "
                         "tagger=<tagger best.pt> too (parser-train-tagger trains one)")
    pipeline = Pipeline(
        parser=(model, vocabs, config), device=torch_device,
        batch_size=options.tokens_per_batch, chunk_sentences=options.chunk_size,
        tokenizer=load_tokenizer(tokenizer, device=torch_device),
        tagger=load_tagger(input_file(tagger, option="tagger"), map_location=torch_device)
        if tagger else None, options=options)
    return pipeline.parse_file(input_path, output_path)
