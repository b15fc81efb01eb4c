"""The annotation columns a prediction writes: the token-level layers' predictions
(:mod:`parser.data.layers`), and what becomes of the input's LEMMA, UPOS, XPOS and FEATS.

Predicted columns replace the input's, so that a file scored with the official script never mixes
gold columns into predictions: a LEMMA, XPOS or FEATS column the model does not predict is written
``_``. UPOS is the exception: a parser without a UPOS head parsed from the input's tags (gold, or
a tagger's), so that column is its input and stays as read. With
``keep_columns=given`` (as ``keep_heads=given`` for heads) the input's values stay wherever it
has one, predictions fill only its ``_``, and a column the model does not predict is kept as read.

A layer whose column is MISC predicts ``Key=value`` entries, which join the input's MISC through
the one MISC writer (:func:`parser.data.misc.merged_misc`, as the confidence and the tokenizer
write theirs): a predicted key replaces the input's (with ``keep_columns=given`` the input's
stays and only keys it lacks are added), every other entry stays (:func:`written_misc`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import torch

from parser.data.batch import Batch
from parser.data.conllu_io import Sentence
from parser.data.layers import Dictionary, TokenLayer, UposColumn, layer_of
from parser.data.misc import misc_entries
from parser.data.vocab import Vocab, Vocabularies
from parser.structs import ParserOutput

__all__ = ["ANNOTATION_COLUMNS", "KEEP_COLUMNS", "dictionary_tags",
           "layer_columns", "misc_of_words", "written_columns", "written_misc"]

ANNOTATION_COLUMNS = ("LEMMA", "UPOS", "XPOS", "FEATS")
KEEP_COLUMNS = ("none", "given")
UPOS = UposColumn()


def layer_columns(out: ParserOutput, batch: Batch, vocabs: Vocabularies,
                  sentences: Sequence[Sentence]) -> dict[int, dict[str, list[str | None]]]:
    """For each sentence of ``batch`` (by its ``batch.index`` into ``sentences``), the column
    values its layers predict (``{"LEMMA": [...], ...}``, one per word); empty without layers."""
    scores = getattr(out, "layer_scores", None) or {}
    index = batch.index.tolist()
    result: dict[int, dict[str, list[str | None]]] = {i: {} for i in index}
    forms = [sentences[i].forms for i in index]
    for name, layer_scores in scores.items():
        layer, classes = layer_of(name), vocabs.layers[name]
        values = layer.decode(forms, layer_scores[:, 1:], classes,
                              _dictionary(vocabs, layer, classes))
        for i, column in zip(index, values):
            result[i][layer.column] = column
    return result


def dictionary_tags(out: ParserOutput, batch: Batch, vocabs: Vocabularies,
                    sentences: Sequence[Sentence]) -> ParserOutput:
    """``out`` with the tags of a parser that tags its own words (``out.upos``) decoded through
    its UPOS dictionary (:class:`parser.data.layers.UposColumn`: a form seen in training takes
    the best of its training tags), before the decoder and the writers read them; unchanged for
    a model without one (older checkpoints, parsers that read given tags)."""
    scores = getattr(out, "tag_scores", None)
    if scores is None or getattr(out, "upos", None) is None or UPOS.name not in vocabs.lexicons:
        return out
    forms = [sentences[i].forms for i in batch.index.tolist()]
    rows, positions, tags = _dictionary(vocabs, UPOS, vocabs.upos).best_cells(forms, scores[:, 1:])
    upos = out.upos.clone()  # one write for the batch (ROOT and padding untouched)
    upos[torch.from_numpy(rows), torch.from_numpy(positions + 1)] = torch.from_numpy(tags).to(upos)
    return replace(out, upos=upos)


def _dictionary(vocabs: Vocabularies, layer: TokenLayer, classes: Vocab) -> Dictionary | None:
    """The :class:`Dictionary` of ``layer`` in ``vocabs``, built once per model (it remembers
    the forms it has seen); None when the vocabularies hold none."""
    found = vocabs.derived.get(layer.name)
    if found is None and layer.name in vocabs.lexicons:
        found = vocabs.derived[layer.name] = Dictionary(layer, vocabs.lexicons[layer.name], classes)
    return found


def written_columns(sentence: Sentence, predicted: Mapping[str, Sequence[str | None]], *,
                    keep_columns: str = "none") -> dict[str, list[str | None]]:
    """The annotation columns to write over ``sentence``'s (a column left out stays as read):
    see the module docstring. ``predicted``: the model's columns (UPOS included when it tags).

    >>> from parser.data.conllu_io import tokenized_sentence
    >>> s = tokenized_sentence(["Dogs", "bark"], path="x", stem="x", line=1)
    >>> written_columns(s, {"LEMMA": ["dog", "bark"]})
    {'LEMMA': ['dog', 'bark'], 'XPOS': [None, None], 'FEATS': [None, None]}
    """
    if keep_columns not in KEEP_COLUMNS:
        raise ValueError(f"keep_columns={keep_columns!r}: expected none or given")
    keep = keep_columns == "given"
    columns: dict[str, list[str | None]] = {}
    for column in ANNOTATION_COLUMNS:
        if column in predicted:
            values = list(predicted[column])
            if keep:
                values = [given if given is not None else guess
                          for given, guess in zip(sentence.column(column), values)]
            columns[column] = values
        elif not keep and column != "UPOS":
            columns[column] = [None] * len(sentence)
    return columns


def written_misc(sentence: Sentence, predicted: Mapping[str, Sequence[str | None]], *,
                 keep_columns: str = "none") -> list[dict[str, str]] | None:
    """Per word, the MISC entries a layer whose column is MISC adds (module docstring); None
    when no layer predicts MISC. A predicted ``_`` adds nothing.

    >>> from parser.data.conllu_io import tokenized_sentence
    >>> s = tokenized_sentence(["Dogs", "bark"], path="x", stem="x", line=1)
    >>> written_misc(s, {"MISC": ["SpaceAfter=No", None]})
    [{'SpaceAfter': 'No'}, {}]
    """
    if keep_columns not in KEEP_COLUMNS:
        raise ValueError(f"keep_columns={keep_columns!r}: expected none or given")
    if "MISC" not in predicted:
        return None
    given = sentence.column("MISC") if keep_columns == "given" else [None] * len(sentence)
    entries = []
    for value, old in zip(predicted["MISC"], given):
        new, kept = misc_entries(value), misc_entries(old)
        entries.append({key: text for key, text in new.items() if key not in kept})
    return entries


def misc_of_words(*layers: Sequence[Mapping[str, str]] | None) -> list[dict[str, str]] | None:
    """The MISC entries of each word from several writers (each None or one mapping per word),
    a later writer's key replacing an earlier one's; None when every writer is None.

    >>> misc_of_words([{"A": "1"}], None, [{"A": "2", "B": "3"}])
    [{'A': '2', 'B': '3'}]
    """
    given = [layer for layer in layers if layer is not None]
    if not given:
        return None
    words: list[dict[str, str]] = [{} for _ in given[0]]
    for layer in given:
        if len(layer) != len(words):
            raise ValueError(f"MISC entries for {len(layer)} words, expected {len(words)}")
        for entry, more in zip(words, layer):
            entry.update(more)
    return words
