"""One annotator behind every prediction path: a parser (its vocabularies, its decoder), an
optional UPOS tagger and the options of a prediction turn chunks of sentences into CoNLL-U.

``predict_file`` (``parser-predict``, ``parser-evaluate checkpoint=``), :class:`parser.Pipeline`
(raw text, tokenised lists, files) and the trainer's final dev/test evaluation all call it, so
every option works on every input kind:

- the best tree of each sentence (``parse``), with the tree CRF's marginals when ``confidence``;
- ``kbest=K`` trees, ``samples=K`` trees drawn with ``seed``, or trees under fixed / forbidden
  arcs (``keep_heads="given"``: the input's heads; or ``constraints`` per sentence):
  :mod:`parser.inference.alternatives`, written by :mod:`parser.inference.write_trees`.

One sentence never costs the others: a sentence longer than ``max_words`` (the bound on one
tree's memory and time, :data:`MAX_WORDS`), or one whose parse fails (no tree under the options,
a value the model cannot take), is written as read with ``# parse_error = <reason>`` and counted
in ``Annotated.failed``. Failures are caught per chunk, so the normal path is the batched one;
a failing chunk is halved until the failing sentences are alone (the others are parsed in the
smaller batches, which give the same trees).

The decoder choice, UD rules and temperatures are the model's ``decoder``
(:class:`parser.models.decoder.Decoder`); :meth:`Annotator.load` applies the command-line
overrides to it.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import conllu
import torch

from parser.data.conllu_io import Sentence
from parser.data.conllu_stream import chunked
from parser.data.vocab import Vocabularies
from parser.inference.alternatives import parse_alternatives
from parser.inference.columns import KEEP_COLUMNS
from parser.inference.confidence import SentenceConfidence
from parser.inference.fixed_arcs import ArcConstraints, given_heads
from parser.inference.loading import load_decoder
from parser.inference.options import MAX_WORDS as OPTIONS_MAX_WORDS
from parser.inference.options import PredictOptions
from parser.inference.parse import parse, prediction_blocks, tag_input, unknown_words
from parser.inference.write_trees import error_block, tree_blocks
from parser.models.parser_model import ParserModel
from parser.runtime.device import resolve_device
from parser.tagger.predict import TrainedTagger

__all__ = ["CELLS_PER_TOKEN", "MAX_WORDS", "Annotated", "Annotator", "ParseCount"]

log = logging.getLogger(__name__)

# Score tensors are [B, N+1, N+1, L]: a token budget alone lets the longest sentence read set the
# peak memory. Batches are also capped at this many (N+1)^2 cells per token of the budget, which
# leaves sentences of up to 39 words batched as before and splits batches of longer ones.
CELLS_PER_TOKEN = 40
KEEP_HEADS = ("none", "given")
# The longest sentence parsed as one tree: its [N+1, N+1, L] scores and the CRF's O(N^3) work.
# One sentence, default model dimensions, one busy CPU thread: 500 words 3.5 s and 0.45 GB peak,
# 1,000 words 20 s and 0.77 GB; 3,000 words took 288 s and 4.2 GB (issue 39).
MAX_WORDS = OPTIONS_MAX_WORDS  # 1000, parser.inference.options
DEFAULTS = PredictOptions()
# What a sentence's parse may raise that costs only that sentence (torch's out-of-memory is a
# RuntimeError: the halved batch may fit). NotImplementedError (an option the model cannot give,
# e.g. k-best without a tree CRF) concerns every sentence: it is raised.
SENTENCE_FAILURES = (ValueError, RuntimeError, ArithmeticError, IndexError)


class ParseCount(int):
    """The number of sentences read (an ``int``), with ``failed``: how many of them were written
    unparsed, with ``# parse_error``."""

    failed: int

    def __new__(cls, count: int, *, failed: int = 0) -> Self:
        value = super().__new__(cls, count)
        value.failed = failed
        return value


@dataclass(frozen=True)
class Annotated:
    """One chunk of ``sentences`` annotated: ``blocks``, the CoNLL-U text of each output block in
    input order (k per sentence with ``kbest``/``samples``); ``failed``: sentences written as
    read with ``# parse_error`` (fixed arcs that admit no tree, over ``max_words``, a failed
    parse); ``unknown``: words the model reads as UNK; ``scores``: ``AttachmentMetric`` scores
    of the best trees when asked for (``score=True``), every sentence had gold heads and none
    failed, else None; ``confidence``: with ``confidence`` and one tree per sentence (no k-best
    or samples), per input sentence the tree CRF's
    :class:`~parser.inference.confidence.SentenceConfidence` of the tree written, under the
    sentence's fixed arcs if any (None for a failed sentence), else None: what
    :mod:`parser.inference.selection` ranks by."""

    blocks: list[str]
    sentences: int
    failed: int = 0
    unknown: int = 0
    scores: dict | None = None
    confidence: list[SentenceConfidence | None] | None = None

    def token_lists(self) -> list[conllu.TokenList]:
        """The blocks as ``conllu.TokenList`` objects (the Python API's result type)."""
        return [conllu.parse_token_and_metadata(block.rstrip("\n")) for block in self.blocks]


class Annotator:
    """A parser with its prediction options (see the module docstring). ``tagger``: UPOS for the
    words without one (every word when ``retag``); ``keep_deps``: keep the input's DEPS column
    (else ``_``: it would contradict the new heads); ``score``: scores of the best trees against
    the input's heads; ``max_words``: longer sentences are not parsed (``# parse_error``);
    ``keep_columns``: ``none`` (predicted LEMMA/UPOS/XPOS/FEATS replace the input's, the ones
    the model does not predict are written ``_``) or ``given`` (the input's values stay where
    given): :mod:`parser.inference.columns`; ``name``: the input's name in messages."""

    def __init__(self, model: ParserModel, vocabs: Vocabularies, *, config: dict | None = None,
                 tagger: TrainedTagger | None = None, retag: bool = False, kbest: int = 0,
                 samples: int = 0, seed: int = 0, keep_heads: str = "none",
                 confidence: bool = False, keep_deps: bool = False, score: bool = False,
                 tokens_per_batch: int = 5000, max_words: int = MAX_WORDS,
                 keep_columns: str = "none", device: torch.device | str = "cpu",
                 name: str = "<input>") -> None:
        if keep_heads not in KEEP_HEADS:
            raise ValueError(f"keep_heads={keep_heads!r}: expected none or given")
        if keep_columns not in KEEP_COLUMNS:
            raise ValueError(f"keep_columns={keep_columns!r}: expected none or given")
        if kbest < 0 or samples < 0 or (kbest and samples):
            raise ValueError(f"kbest={kbest}, samples={samples}: expected one of them (>= 1), or neither")
        for option, value in (("tokens_per_batch", tokens_per_batch), ("max_words", max_words)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{option}={value}: expected a positive integer")
        if retag and tagger is None:
            raise ValueError("retag=true: give the tagger to tag with (tagger=<tagger best.pt>)")
        self.model, self.vocabs, self.config, self.tagger = model, vocabs, config, tagger
        self.retag, self.kbest, self.samples, self.seed = retag, kbest, samples, seed
        self.keep_heads, self.confidence, self.keep_deps = keep_heads, confidence, keep_deps
        self.score, self.tokens_per_batch, self.name = score, tokens_per_batch, name
        self.max_words, self.keep_columns = max_words, keep_columns
        self.device = resolve_device(str(device)) if isinstance(device, str) else device
        self.blocks = True  # False: annotate() formats no CoNLL-U blocks (scoring_only)

    @classmethod
    def of(cls, model: ParserModel, vocabs: Vocabularies, options: PredictOptions, *,
           config: dict | None = None, tagger: TrainedTagger | None = None,
           device: torch.device | str | None = None, name: str = "<input>") -> Annotator:
        """The annotator of a loaded parser with the prediction options of one request (its
        decoder fields are applied when a model loads: :meth:`load`); ``device``: the model's
        (None: ``options.device``)."""
        return cls(model, vocabs, config=config, tagger=tagger, retag=options.retag,
                   kbest=options.kbest, samples=options.samples, seed=options.seed,
                   keep_heads=options.keep_heads, confidence=options.confidence,
                   keep_deps=options.keep_deps, tokens_per_batch=options.tokens_per_batch,
                   max_words=options.max_words, keep_columns=options.keep_columns,
                   device=options.device if device is None else device, name=name)

    @classmethod
    def load(cls, checkpoint: str | Path, options: PredictOptions = DEFAULTS, *,
             tagger: TrainedTagger | None = None, name: str = "<input>") -> Annotator:
        """The annotator of a parser checkpoint with ``options``, its decoder overridden where
        ``options``' ``projective``, ``attach_to_units`` (UPOS names), ``ud_rules`` or
        ``label_grid`` are not None."""
        torch_device = resolve_device(options.device)
        model, vocabs, config = load_decoder(checkpoint, device=torch_device, **options.decoder())
        return cls.of(model, vocabs, options, config=config, tagger=tagger, device=torch_device,
                      name=name)

    def scoring_only(self) -> Annotator:
        """This annotator, but :meth:`annotate` returns empty blocks and predicts no layer
        columns: the trees' scores and confidence alone, what ranking a pool reads (a copy)."""
        other = copy.copy(self)
        other.blocks = False
        return other

    @property
    def alternatives(self) -> bool:
        """Whether the output needs the tree CRF's alternatives writer (k-best, samples, arcs)."""
        return bool(self.kbest or self.samples or self.keep_heads == "given")

    def stream(self, sentences: Iterable[Sentence], *, chunk_size: int,
               constraints: Sequence[ArcConstraints | None] | None = None) -> Iterator[Annotated]:
        """The annotation of ``sentences``, ``chunk_size`` at a time (memory holds one chunk);
        ``constraints``: one per input sentence (None: from ``keep_heads``)."""
        position = 0
        for chunk in chunked(sentences, chunk_size):
            rows = None if constraints is None else constraints[position : position + len(chunk)]
            yield self.annotate(chunk, position=position, constraints=rows)
            position += len(chunk)

    @torch.no_grad()
    def annotate(self, chunk: Sequence[Sentence], *, position: int = 0,
                 constraints: Sequence[ArcConstraints | None] | None = None) -> Annotated:
        """One chunk (``position``: the 0-based input position of ``chunk[0]``, which numbers
        sentences without an id and seeds the samples); ``constraints``: one per sentence."""
        chunk = list(chunk)
        unknown = unknown_words(chunk, self.vocabs)[0]
        if constraints is None and self.keep_heads == "given":
            constraints = [given_heads(sentence) for sentence in chunk]
        blocks, failed, scores, sure = self._isolated(chunk, position=position,
                                                      constraints=constraints)
        # one tree per sentence (no k-best, no samples): its marginals, under the constraints
        structured = self.confidence and not (self.kbest or self.samples)
        return Annotated(blocks, len(chunk), failed=failed, unknown=unknown, scores=scores,
                         confidence=sure if structured else None)

    def _isolated(self, chunk: list[Sentence], *, position: int,
                  constraints: Sequence[ArcConstraints | None] | None,
                  ) -> tuple[list[str], int, dict | None, list[SentenceConfidence | None]]:
        """``(blocks, sentences failed, scores, confidence per sentence)`` of ``chunk`` parsed as
        one unless it holds an over-long sentence or its parse fails: then each half alone
        (scores None)."""
        long = [len(sentence) > self.max_words for sentence in chunk]
        if len(chunk) == 1 and long[0]:
            return self._failed(chunk[0], position, f"{len(chunk[0])} words, more than "
                                f"max_words={self.max_words} (the longest sentence parsed)")
        if not any(long):
            try:
                return self._parse(chunk, position=position, constraints=constraints)
            except NotImplementedError:
                raise
            except SENTENCE_FAILURES as error:
                if len(chunk) == 1:
                    return self._failed(chunk[0], position, str(error) or type(error).__name__)
        half = len(chunk) // 2
        first, second = (self._isolated(
            chunk[start:end], position=position + start,
            constraints=None if constraints is None else constraints[start:end])
            for start, end in ((0, half), (half, len(chunk))))
        return first[0] + second[0], first[1] + second[1], None, first[3] + second[3]

    def _failed(self, sentence: Sentence, position: int, reason: str,
                ) -> tuple[list[str], int, None, list[None]]:
        log.warning("%s: sentence %s (line %d) not parsed: %s", self.name,
                    sentence.sent_id or position + 1, sentence.line, reason)
        return [error_block(sentence, reason)], 1, None, [None]

    def _parse(self, chunk: list[Sentence], *, position: int,
               constraints: Sequence[ArcConstraints | None] | None,
               ) -> tuple[list[str], int, dict | None, list[SentenceConfidence | None]]:
        """``(blocks, sentences refused by their constraints, scores, confidence)`` of one chunk,
        batched."""
        words, upos = chunk, None
        if self.tagger is not None:
            words, upos = tag_input(chunk, self.tagger, retag=self.retag,
                                    tokens_per_batch=self.tokens_per_batch)
        if self.alternatives or constraints is not None:
            blocks, refused, sure = self._trees(chunk, words, upos, position=position,
                                                constraints=constraints)
            return blocks, refused, None, sure
        predictions = parse(self.model, words, self.vocabs, tokens_per_batch=self.tokens_per_batch,
                            cells_per_batch=CELLS_PER_TOKEN * self.tokens_per_batch,
                            device=self.device, score=self.score, confidence=self.confidence,
                            columns=self.blocks)
        blocks = (prediction_blocks(chunk, predictions, upos=upos, keep_deps=self.keep_deps,
                                    keep_columns=self.keep_columns) if self.blocks
                  else [""] * len(chunk))
        return blocks, 0, predictions.scores, predictions.confidence or [None] * len(chunk)

    def _trees(self, chunk: list[Sentence], words: list[Sentence], upos, *, position: int,
               constraints: Sequence[ArcConstraints | None] | None,
               ) -> tuple[list[str], int, list[SentenceConfidence | None]]:
        """The one k-best / samples / fixed-arcs writer: ``(blocks, sentences refused, the
        confidence of each sentence's first tree)`` (None: refused, or no confidence)."""
        entries = parse_alternatives(
            self.model, words, self.vocabs, tokens_per_batch=self.tokens_per_batch,
            cells_per_batch=CELLS_PER_TOKEN * self.tokens_per_batch, device=self.device,
            kbest=self.kbest, samples=self.samples, seed=self.seed, constraints=constraints,
            confidence=self.confidence, first_position=position)
        mode = "kbest" if self.kbest else "samples" if self.samples else "best"
        blocks: list[str] = []
        refused = 0
        sure = [entry.trees[0].confidence if entry.trees else None for entry in entries]
        for j, (sentence, entry) in enumerate(zip(chunk, entries)):
            if entry.error is not None:
                refused += 1
                log.warning("%s: sentence %s (line %d): its fixed arcs were refused: %s", self.name,
                            sentence.sent_id or position + j + 1, sentence.line, entry.error)
            blocks.extend(tree_blocks(sentence, entry, position=position + j, mode=mode,
                                      upos=None if upos is None else upos[j],
                                      keep_deps=self.keep_deps, keep_columns=self.keep_columns))
        return blocks, refused, sure
