"""Using a trained tokenizer: raw text -> sentences of tokens (and their words) -> CoNLL-U.

Text is read as paragraphs separated by blank lines; a paragraph end is always a sentence end.
A paragraph of any length is tagged in windows of ``window`` characters, each read with
``context`` characters either side, so memory does not grow with the paragraph.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from parser.data.conllu_io import Sentence
from parser.data.misc import SPACE_AFTER, merged_misc
from parser.data.validate import parse_rows
from parser.data.vocab import Vocab
from parser.runtime.checkpoint import CheckpointError, load_checkpoint
from parser.tokenize.model import CharTagger, char_class
from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.text import B, E, I, Paragraph, S, Token

__all__ = [
    "KIND", "TrainedTokenizer", "encode", "load_tokenizer", "split_paragraphs", "tag_texts",
    "to_sentence", "tokenize_paragraphs", "tokenizer_state",
]

KIND = "tokenizer"
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n\s*")


@dataclass
class TrainedTokenizer:
    """A character tagger, its character vocabulary and the multiword table."""

    model: CharTagger
    chars: Vocab
    multiwords: MultiwordTable
    window: int = 500
    context: int = 100


def tokenizer_state(tokenizer: TrainedTokenizer, **extra: object) -> dict:
    """The checkpoint dict (plain containers and tensors), ``extra`` added."""
    return {"kind": KIND, "hparams": dict(tokenizer.model.hparams),
            "model": tokenizer.model.state_dict(), "chars": tokenizer.chars.state_dict(),
            "multiwords": tokenizer.multiwords.state_dict(),
            "window": tokenizer.window, "context": tokenizer.context, **extra}


def tokenizer_from_state(state: dict, *, where: str) -> TrainedTokenizer:
    if state.get("kind") != KIND:
        raise CheckpointError(f"{where}: kind {state.get('kind')!r}, not a tokenizer")
    model = CharTagger(**state["hparams"])
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as error:
        raise CheckpointError(f"{where}: weights do not fit the tokenizer: {error}") from error
    return TrainedTokenizer(model.eval(), Vocab.from_state_dict(state["chars"]),
                            MultiwordTable.from_state_dict(state["multiwords"]),
                            int(state["window"]), int(state["context"]))


def load_tokenizer(path: str | os.PathLike, *, device: str | torch.device = "cpu") -> TrainedTokenizer:
    """The tokenizer saved at ``path`` (``best.pt`` of ``parser-train-tokenizer``), in eval mode."""
    tokenizer = tokenizer_from_state(load_checkpoint(path, map_location="cpu"), where=str(path))
    tokenizer.model.to(device)
    return tokenizer


def encode(text: str, chars: Vocab) -> tuple[list[int], list[int]]:
    """Character ids (whitespace read as a space) and class ids of ``text``."""
    return ([chars.index(" " if c.isspace() else c) for c in text], [char_class(c) for c in text])


def _batch(pieces: Sequence[tuple[list[int], list[int]]], device) -> tuple:
    longest = max(len(p[0]) for p in pieces)
    chars = torch.zeros(len(pieces), longest, dtype=torch.long)
    classes = torch.zeros(len(pieces), longest, dtype=torch.long)
    for row, (ids, kinds) in enumerate(pieces):
        chars[row, : len(ids)] = torch.tensor(ids)
        classes[row, : len(kinds)] = torch.tensor(kinds)
    lengths = torch.tensor([len(p[0]) for p in pieces])
    return chars.to(device), classes.to(device), lengths.to(device)


@torch.no_grad()
def tag_texts(tokenizer: TrainedTokenizer, texts: Sequence[str], *,
              windows_per_batch: int = 32) -> list[list[int]]:
    """The Viterbi tags of every character of every text (windowed, see the module docstring)."""
    model = tokenizer.model
    device = next(model.parameters()).device
    window, context = tokenizer.window, tokenizer.context
    jobs = []  # (text index, kept start, kept end, input start)
    for t, text in enumerate(texts):
        for start in range(0, len(text), window):
            jobs.append((t, start, min(start + window, len(text)), max(0, start - context)))
    # longest first: a batch runs as many LSTM steps as its longest window, so windows of like
    # lengths batched together leave fewer steps to rows that have ended (each window's tags are
    # its own: the order changes no tag)
    jobs.sort(key=lambda job: min(job[2] + context, len(texts[job[0]])) - job[3], reverse=True)
    tags: list[list[int]] = [[0] * len(text) for text in texts]
    encoded = [encode(text, tokenizer.chars) for text in texts]
    was_training = model.training
    model.eval()
    try:
        for first in range(0, len(jobs), windows_per_batch):
            group = jobs[first : first + windows_per_batch]
            pieces = []
            for t, start, end, begin in group:
                stop = min(end + context, len(texts[t]))
                pieces.append((encoded[t][0][begin:stop], encoded[t][1][begin:stop]))
            best = model(*_batch(pieces, device)).argmax().cpu().tolist()
            for (t, start, end, begin), row in zip(group, best):
                tags[t][start:end] = row[start - begin : end - begin]
    finally:
        model.train(was_training)
    return tags


def _decode(text: str, tags: Sequence[int], multiwords: MultiwordTable) -> list[list[Token]]:
    sentences: list[list[Token]] = []
    sentence: list[Token] = []
    start = None
    for k, (char, tag) in enumerate(zip(text, tags)):
        if char.isspace():
            continue
        if start is None or tag in (B, S) or text[k - 1].isspace():
            start = k
        follows = tags[k + 1] if k + 1 < len(text) else None
        if tag in (E, S) or follows not in (I, E) or text[k + 1].isspace():
            form = text[start : k + 1]
            space = k + 1 == len(text) or text[k + 1].isspace()  # a paragraph end is a break
            sentence.append(Token(form, space, multiwords.split(form)))
            start = None
            if tag in (E, S):
                sentences.append(sentence)
                sentence = []
    if sentence:
        sentences.append(sentence)
    return sentences


def split_paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, stripped, empty ones dropped."""
    return [p.strip() for p in _BLANK_LINE.split(text) if p.strip()]


def tokenize_paragraphs(tokenizer: TrainedTokenizer, paragraphs: Sequence[str], *,
                        windows_per_batch: int = 32) -> list[Paragraph]:
    """Each paragraph's sentences of tokens."""
    tags = tag_texts(tokenizer, paragraphs, windows_per_batch=windows_per_batch)
    return [_decode(text, t, tokenizer.multiwords) for text, t in zip(paragraphs, tags)]


def _rows(tokens: Sequence[Token]) -> list[str]:
    rows, word = [], 1
    for token in tokens:
        misc = merged_misc("_", {SPACE_AFTER: None if token.space_after else "No"})
        if len(token.words) > 1:
            last = word + len(token.words) - 1
            rows.append(f"{word}-{last}\t{token.form}\t_\t_\t_\t_\t_\t_\t_\t{misc}")
            rows += [f"{word + i}\t{w}\t_\t_\t_\t_\t_\t_\t_\t_" for i, w in enumerate(token.words)]
            word = last + 1
        else:
            rows.append(f"{word}\t{token.form}\t_\t_\t_\t_\t_\t_\t_\t{misc}")
            word += 1
    return rows


def to_sentence(tokens: Sequence[Token], *, sent_id: str, comments: Iterable[str] = (),
                path: str = "<text>", line: int = 1) -> Sentence:
    """A :class:`~parser.data.conllu_io.Sentence` (heads unannotated) of tokenised text, with
    ``# sent_id``, ``# text`` and any other ``comments`` (``# newpar`` ...) first."""
    text = "".join(t.form + (" " if t.space_after else "") for t in tokens).rstrip()
    lines = [*comments, f"# sent_id = {sent_id}", f"# text = {text}", *_rows(tokens)]
    rows = parse_rows(lines, path=path, first_line=line, require_trees=False)
    return Sentence(lines, rows.forms, rows.lemmas, rows.upos, rows.heads, rows.deprels, path,
                    line, rows.word_lines, rows.word_rows)


def iter_sentences(tokenizer: TrainedTokenizer, paragraphs: Iterable[str], *, path: str = "<text>",
                   paragraphs_per_batch: int = 64) -> Iterator[Sentence]:
    """Sentences of a stream of paragraphs, tokenised ``paragraphs_per_batch`` at a time (bounded
    memory); ``# newpar`` opens each paragraph's first sentence."""
    count = 0
    batch: list[str] = []

    def flush() -> Iterator[Sentence]:
        nonlocal count
        for paragraph in tokenize_paragraphs(tokenizer, batch):
            for s, tokens in enumerate(paragraph):
                count += 1
                yield to_sentence(tokens, sent_id=str(count), path=path,
                                  comments=("# newpar",) if s == 0 else ())
        batch.clear()

    for paragraph in paragraphs:
        batch.append(paragraph)
        if len(batch) >= paragraphs_per_batch:
            yield from flush()
    if batch:
        yield from flush()

