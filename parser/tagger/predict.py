"""Using a trained tagger: load a checkpoint, tag sentences, score UPOS accuracy.

``load_tagger(path)`` reads a checkpoint written by ``parser-train-tagger`` (``best.pt``) and
``tag_sentences(tagger, sentences)`` returns one UPOS string per word, in input order; this is what
the parser's prediction calls when its input lacks UPOS.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from parser.data.batching import BucketBatcher, encode_all
from parser.data.conllu_io import Sentence
from parser.data.vocab import Vocabularies
from parser.runtime.checkpoint import CheckpointError, load_checkpoint
from parser.tagger.model import Tagger, tags_to_upos_ids

__all__ = ["TrainedTagger", "load_tagger", "tag_sentences", "tagger_state", "upos_accuracy"]

KIND = "upos-tagger"


@dataclass(frozen=True)
class TrainedTagger:
    """A tagger and the vocabularies it was trained with."""

    model: Tagger
    vocabs: Vocabularies


def tagger_state(model: Tagger, vocabs: Vocabularies, **extra: object) -> dict:
    """The checkpoint dict of a tagger (plain containers and tensors only), ``extra`` added."""
    return {"kind": KIND, "hparams": dict(model.hparams), "model": model.state_dict(),
            "vocabs": vocabs.state_dict(), **extra}


def load_tagger(path: str | os.PathLike, *, map_location: str | torch.device = "cpu") -> TrainedTagger:
    """The tagger saved at ``path``, in eval mode; ``CheckpointError`` (a ValueError) naming the
    file when it is not a tagger checkpoint."""
    state = load_checkpoint(path, map_location=map_location)
    if state.get("kind") != KIND:
        raise CheckpointError(f"checkpoint {path}: kind {state.get('kind')!r}, not a UPOS tagger")
    vocabs = Vocabularies.from_state_dict(state["vocabs"])
    model = Tagger(**state["hparams"])
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:
        raise CheckpointError(f"checkpoint {path}: weights do not fit the tagger: {error}") from error
    model.eval()
    return TrainedTagger(model.to(map_location), vocabs)


def _as_sentence(item: Sentence | Sequence[str], number: int) -> Sentence:
    if isinstance(item, Sentence):
        return item
    if isinstance(item, str) or not all(isinstance(form, str) for form in item):
        raise ValueError(f"tag_sentences: sentence {number} must be a Sentence or a list of word "
                         f"forms; got {item!r:.80}")
    forms = list(item)
    n = len(forms)
    return Sentence([], forms, ["_"] * n, [None] * n, [-1] * n, [None] * n, "<input>", number,
                    [number] * n, [])


@torch.no_grad()
def tag_sentences(
    tagger: TrainedTagger, sentences: Sequence[Sentence | Sequence[str]], *,
    tokens_per_batch: int = 5000,
) -> list[list[str]]:
    """UPOS of every word of every sentence (``Sentence`` objects or lists of forms), Viterbi
    decoded, aligned with the input; an empty sentence gets ``[]``."""
    sentences = [_as_sentence(s, i) for i, s in enumerate(sentences)]
    result: list[list[str]] = [[] for _ in sentences]
    keep = [i for i, s in enumerate(sentences) if len(s) > 0]
    if not keep:
        return result
    encoded = encode_all([sentences[i] for i in keep], tagger.vocabs)
    batcher = BucketBatcher(encoded, tokens_per_batch=tokens_per_batch, shuffle=False,
                            labeled=False)
    model = tagger.model
    device = next(model.parameters()).device
    upos = tagger.vocabs.upos.tokens
    for batch in batcher:
        predicted = tags_to_upos_ids(model.predict(batch.to(device))).cpu().tolist()
        for row, index in enumerate(batch.index.tolist()):
            n = int(batch.lengths[row])
            result[keep[index]] = [upos[t] for t in predicted[row][:n]]
    return result


def upos_accuracy(tagger: TrainedTagger, sentences: Sequence[Sentence], *,
                  tokens_per_batch: int = 5000) -> dict[str, float | int]:
    """``{"accuracy", "correct", "total"}`` over the words with a gold UPOS (a gold tag the
    tagger never saw counts as an error)."""
    predicted = tag_sentences(tagger, sentences, tokens_per_batch=tokens_per_batch)
    correct = total = 0
    for sentence, tags in zip(sentences, predicted):
        for gold, guess in zip(sentence.upos, tags):
            if gold is None:
                continue
            total += 1
            correct += gold == guess
    return {"accuracy": correct / total if total else 0.0, "correct": correct, "total": total}

