"""Temperature scaling of a trained parser's tree CRF, fitted on gold trees (dev), and the
outcomes that measure its calibration (:mod:`parser.eval.calibration`).

What is fitted. The arc temperature T divides the scores of the tree CRF the parser predicts
from (after the UD rules' masks: :func:`parser.models.decoder.tempered`), and is chosen to
minimise the negative log-likelihood of the gold TREES under ``TreeCRF(scores / T)``: the
model's own training criterion, so its maximum is the temperature under which the whole
distribution over trees (and with it every marginal ``HeadProb`` and the tree log-probability)
fits held-out trees best. ``log Z(b * scores) - b * score(gold)`` is convex in b = 1/T (a
log-partition function is convex in its natural parameters), so the NLL has one minimum along
log T and a golden-section search finds it. The NLL of the gold heads' marginals alone (a sum
of per-word terms) ignores that the heads of a tree constrain each other; minimising ECE by a
grid is noisier (binning) and does not calibrate the tree probabilities. The label temperature
(a relation classifier, Dozat & Manning) minimises the NLL of the gold relations on the gold
arcs, also convex in 1/T. A joint model (one labeled CRF over ``arcs + labels``) gets one
temperature for both, fitted on the gold labeled trees: unequal ones would change its decoded
trees. Temperatures are searched in [1/20, 20].

Sentences whose gold tree the model's distribution rules out (a tree a UD rule forbids, a
non-projective tree under a projective CRF, an unannotated word) are left out of the arc fit,
and words whose gold relation is ruled out (or unseen in training) of the label fit; their
numbers are reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.inference.parse import parse
from parser.models.decoder import N_SPECIAL_RELS
from parser.models.parser_model import ParserModel

__all__ = [
    "BOUNDS", "GoldScores", "Outcomes", "TemperatureFit", "collect_gold_scores", "fit_temperatures",
    "golden_section", "label_nll", "measure", "tree_nll",
]

BOUNDS = (1 / 20, 20.0)  # temperatures searched


@dataclass(frozen=True)
class GoldScores:
    """The untempered scores of the tree CRF a parser predicts from, with gold trees: per batch
    ``(dist class, scores [B, N+1, N+1(, L)], lengths [B], heads [B, N+1], labels [B, N+1] or
    None, usable [B])`` (``usable``: the gold tree has a finite probability); and, for a relation
    classifier, the relation scores on the gold arcs of the words it can score, ``label_rows [W,
    L]`` (special relations at -inf) with their gold ids ``label_gold [W]``."""

    batches: list[tuple[type, Tensor, Tensor, Tensor, Tensor | None, Tensor]]
    single_root: bool
    joint: bool
    label_rows: Tensor | None
    label_gold: Tensor | None
    sentences_left_out: int
    words_left_out: int


@torch.no_grad()
def collect_gold_scores(model: ParserModel, sentences: Sequence[Sentence], vocabs: Vocabularies, *,
                        tokens_per_batch: int, device: torch.device | str = "cpu") -> GoldScores:
    """Run ``model`` (eval mode, temperatures 1) over gold ``sentences`` once and keep what the
    temperature fits need, on the CPU."""
    encoded = encode_all(list(sentences), vocabs)
    batcher = BucketBatcher(encoded, tokens_per_batch=tokens_per_batch, shuffle=False,
                            max_length=None, labeled=True)
    saved = (model.decoder, model.training)
    model.decoder = replace(model.decoder, arc_temperature=1.0, label_temperature=1.0)
    model.eval()
    batches, rows, golds = [], [], []
    sentences_out = words_out = 0
    joint = False
    try:
        for batch in batcher:
            out = model(batch.to(device), label_grid=model.decoder.label_grid)
            dist = out.dist
            joint = bool(getattr(dist, "labeled", False))
            scores, lengths = dist.scores.cpu(), batch.lengths.cpu()
            heads, rels = batch.heads.cpu(), batch.rels.cpu()
            size = heads.shape[1]
            words = (torch.arange(size)[None] >= 1) & (torch.arange(size)[None] <= lengths[:, None])
            annotated = ~((heads < 0) & words).any(1)
            if joint:  # a labeled tree needs every relation (one unseen in training: UNK)
                annotated &= ~((rels < N_SPECIAL_RELS) & words).any(1)
            safe_heads = torch.where(words & annotated[:, None], heads, 0)
            safe_rels = torch.where(words & annotated[:, None], rels, 0)
            labels = safe_rels if joint else None
            logp = type(dist)(scores, lengths, single_root=dist.single_root).log_prob(
                *((safe_heads, labels) if joint else (safe_heads,)))
            usable = annotated & torch.isfinite(logp)
            sentences_out += int((~usable).sum())
            batches.append((type(dist), scores, lengths, safe_heads, labels, usable))
            on_arc = out.labels_on(heads.to(device))
            if on_arc is not None:  # classifier: relation scores on the gold arcs
                on_arc = on_arc.cpu().clone()
                on_arc[..., :N_SPECIAL_RELS] = float("-inf")
                gold = rels.clamp(min=0)
                scored = words & (heads >= 0) & (rels >= N_SPECIAL_RELS)
                scored &= torch.isfinite(on_arc.gather(2, gold[..., None]).squeeze(2))
                words_out += int((words & ~scored).sum())
                rows.append(on_arc[scored])
                golds.append(gold[scored])
    finally:
        model.decoder = saved[0]
        model.train(saved[1])
    return GoldScores(batches=batches, single_root=model.single_root, joint=joint,
                      label_rows=torch.cat(rows) if rows else None,
                      label_gold=torch.cat(golds) if golds else None,
                      sentences_left_out=sentences_out, words_left_out=words_out)


def tree_nll(gold: GoldScores, temperature: float) -> float:
    """Mean over usable sentences of -log p(gold tree) under the CRF with scores / temperature
    (labeled trees for a joint model)."""
    total, count = 0.0, 0
    for kind, scores, lengths, heads, labels, usable in gold.batches:
        if not usable.any():
            continue
        dist = kind(scores[usable] / temperature, lengths[usable], single_root=gold.single_root)
        args = (heads[usable],) if labels is None else (heads[usable], labels[usable])
        total -= float(dist.log_prob(*args).double().sum())
        count += int(usable.sum())
    return total / count if count else math.nan


def label_nll(gold: GoldScores, temperature: float) -> float:
    """Mean over scored words of -log p(gold relation | gold arc) with relation scores /
    temperature (a relation classifier; nan without one)."""
    if gold.label_rows is None or not len(gold.label_gold):
        return math.nan
    log_probs = (gold.label_rows.double() / temperature).log_softmax(-1)
    return float(-log_probs.gather(1, gold.label_gold[:, None]).mean())


def golden_section(f: Callable[[float], float], low: float, high: float, *,
                   tolerance: float = 1e-3) -> float:
    """The minimiser of a unimodal ``f`` on ``[low, high]``, to ``tolerance``.

    >>> round(golden_section(lambda x: (x - 0.3) ** 2, -1.0, 2.0), 3)
    0.3
    """
    ratio = (math.sqrt(5) - 1) / 2
    a, b = low, high
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tolerance:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    return (a + b) / 2


@dataclass(frozen=True)
class TemperatureFit:
    """Fitted temperatures and the dev NLLs (nats per sentence for trees, per word for
    relations) before (T = 1) and after; counts of what the fits used and left out."""

    arc_temperature: float
    label_temperature: float
    tree_nll_before: float
    tree_nll_after: float
    label_nll_before: float
    label_nll_after: float
    sentences: int
    sentences_left_out: int
    label_words: int
    label_words_left_out: int

    def calibration_entry(self) -> dict:
        """The checkpoint's ``calibration`` entry (read by
        :func:`parser.inference.loading.parser_from_state`)."""
        return {"arc_temperature": self.arc_temperature, "label_temperature": self.label_temperature,
                "objective": "gold tree NLL (arcs), gold relation NLL on gold arcs (labels)",
                "tree_nll_before": self.tree_nll_before, "tree_nll_after": self.tree_nll_after,
                "label_nll_before": self.label_nll_before, "label_nll_after": self.label_nll_after,
                "sentences": self.sentences}


def fit_temperatures(gold: GoldScores, *, tolerance: float = 1e-3) -> TemperatureFit:
    """Golden-section search over log T of :func:`tree_nll` and :func:`label_nll` (see the
    module docstring); a joint model's label temperature is its arc temperature."""
    low, high = (math.log(bound) for bound in BOUNDS)
    used = sum(int(b[-1].sum()) for b in gold.batches)
    if not used:
        raise ValueError("calibration: no sentence has a gold tree the model allows; nothing to fit")
    arc = math.exp(golden_section(lambda t: tree_nll(gold, math.exp(t)), low, high, tolerance=tolerance))
    if gold.label_rows is not None and len(gold.label_gold):
        label = math.exp(golden_section(lambda t: label_nll(gold, math.exp(t)), low, high,
                                        tolerance=tolerance))
    else:
        label = arc if gold.joint else 1.0
    return TemperatureFit(
        arc_temperature=arc, label_temperature=label,
        tree_nll_before=tree_nll(gold, 1.0), tree_nll_after=tree_nll(gold, arc),
        label_nll_before=label_nll(gold, 1.0), label_nll_after=label_nll(gold, label),
        sentences=used, sentences_left_out=gold.sentences_left_out,
        label_words=0 if gold.label_gold is None else len(gold.label_gold),
        label_words_left_out=gold.words_left_out)


@dataclass(frozen=True)
class Outcomes:
    """Per word (annotated words, input order): ``head_probs`` (HeadProb), ``head_correct``,
    ``punct`` (gold UPOS PUNCT); on the words whose head is right: ``label_probs``
    (DeprelProb), ``label_correct`` (exact relation, subtype included), ``label_punct``; per
    sentence: ``sentence_scores`` (mean HeadProb = expected UAS), ``sentence_correct`` (heads
    right) and ``sentence_words``."""

    head_probs: list[float]
    head_correct: list[bool]
    punct: list[bool]
    label_probs: list[float]
    label_correct: list[bool]
    label_punct: list[bool]
    sentence_scores: list[float]
    sentence_correct: list[int]
    sentence_words: list[int]


def measure(model: ParserModel, sentences: Sequence[Sentence], vocabs: Vocabularies, *,
            tokens_per_batch: int, device: torch.device | str = "cpu") -> Outcomes:
    """Parse gold ``sentences`` with ``model`` as ``parser-predict confidence=true`` does and pair
    each word's HeadProb / DeprelProb with whether the head / relation written is the gold one."""
    predictions = parse(model, sentences, vocabs, tokens_per_batch=tokens_per_batch, device=device,
                        score=False, confidence=True)
    result = Outcomes([], [], [], [], [], [], [], [], [])
    for sentence, heads, rels, sure in zip(sentences, predictions.heads, predictions.deprels,
                                           predictions.confidence):
        right = words = 0
        for i, gold_head in enumerate(sentence.heads):
            if gold_head < 0:
                continue
            ok = heads[i] == gold_head
            punct = sentence.upos[i] == "PUNCT"
            result.head_probs.append(_probability(sure.head_probs[i]))
            result.head_correct.append(ok)
            result.punct.append(punct)
            right, words = right + ok, words + 1
            if ok and sure.deprel_probs is not None and sentence.deprels[i] is not None:
                result.label_probs.append(_probability(sure.deprel_probs[i]))
                result.label_correct.append(rels[i] == sentence.deprels[i])
                result.label_punct.append(punct)
        if words:
            annotated = [p for p, h in zip(sure.head_probs, sentence.heads) if h >= 0]
            result.sentence_scores.append(sum(annotated) / words)
            result.sentence_correct.append(right)
            result.sentence_words.append(words)
    return result


def _probability(value: float) -> float:
    """A marginal clipped to 0..1 (float32 rounding can put 1 + 1e-7 there)."""
    return min(max(value, 0.0), 1.0)
