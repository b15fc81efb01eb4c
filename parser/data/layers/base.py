"""Token-level annotation layers: one class per CoNLL-U column a parser predicts beside the tree.

A layer says which column it reads and writes (``column``), how the classes of its head are built
from training data (:meth:`TokenLayer.classes`: the column's values, or for LEMMA edit scripts
from the form), its head on the shared encoder states (:meth:`TokenLayer.head`), its loss
(:meth:`TokenLayer.loss`), how its scores become the column's strings (:meth:`TokenLayer.decode`,
through a dictionary of the training data: :meth:`TokenLayer.lexicon`). A layer's predicted
class feeds the parser's input when the model config names it in ``model.layer_inputs`` (the
biaffine scorer's business, not the layer's: docs/layout.md, "Tags fed to the parser"). The
vocabularies, the batch, the model, the checkpoint, the annotator and the
writers iterate over the layers a model has (those whose classes its vocabularies hold,
``Vocabularies.layers``); none of them names a column.

A new layer is a subclass registered with :func:`register_layer`, its name in ``model.layers``,
and a test (docs/layout.md, "Adding an annotation layer").
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from itertools import chain
from typing import ClassVar, Protocol

import numpy as np
import torch
from torch import Tensor, nn

from parser.data.conllu_io import Sentence
from parser.data.form_table import FormTable
from parser.data.vocab import N_SPECIAL, Vocab

__all__ = ["LAYERS", "WRITTEN_COLUMNS", "Dictionary", "TokenLayer", "encode_targets", "layer_of",
           "register_layer"]

log = logging.getLogger(__name__)

UNDERSCORE = "_"  # the class of an empty value (underscore_is_value)
SUFFIX_LENGTH = 4  # the dictionary's longest suffix (TokenLayer.lexicon; chosen on dev)

LAYERS: dict[str, type[TokenLayer]] = {}
"""Every registered layer class by its name (``model.layers`` entries)."""

WRITTEN_COLUMNS = ("LEMMA", "UPOS", "XPOS", "FEATS", "MISC")
"""The columns a layer's prediction is written to (:mod:`parser.inference.columns`; MISC as
``Key=value`` entries merged into the input's): a layer on any other column is refused."""


def register_layer(cls: type[TokenLayer]) -> type[TokenLayer]:
    """Class decorator: make ``cls`` available as ``model.layers: [<cls.name>]``."""
    if not cls.name or not cls.column:
        raise ValueError(f"layer class {cls.__name__}: set its name and column")
    if cls.column not in WRITTEN_COLUMNS:
        raise ValueError(f"layer class {cls.__name__}: column {cls.column!r} cannot be written "
                         f"(its predictions would be dropped); a layer predicts one of "
                         f"{', '.join(WRITTEN_COLUMNS)}")
    if cls.name in LAYERS and LAYERS[cls.name] is not cls:
        raise ValueError(f"layer {cls.name!r} is registered twice ({LAYERS[cls.name].__name__}, "
                         f"{cls.__name__})")
    LAYERS[cls.name] = cls
    return cls


def layer_of(name: str) -> TokenLayer:
    """The registered layer ``name`` (``xpos``, ``feats``, ``lemma``, ...): one instance per class
    (layers hold no state), so the per-sentence encoders and per-batch decoders make none."""
    try:
        return _instance(LAYERS[name])
    except KeyError:
        raise ValueError(f"model.layers: unknown layer {name!r}; registered: "
                         f"{', '.join(sorted(LAYERS))}") from None


@cache
def _instance(cls: type[TokenLayer]) -> TokenLayer:
    return cls()


class TokenLayer:
    """One CoNLL-U column predicted per word by a softmax head over whole-string classes.

    The defaults suit a column whose values are the classes (XPOS, FEATS); a subclass maps values
    to classes and back (:meth:`target`, :meth:`value`: LEMMA's edit scripts), or replaces the
    head, loss or decoding. Class ids follow the vocabularies' layout: 0..2 are PAD, UNK, ROOT
    and never predicted; a word whose class was not kept (rare, see :meth:`classes`) has UNK and
    is left out of the loss.
    """

    name: ClassVar[str] = ""
    column: ClassVar[str] = ""
    # '_' is a value of the column, not a gap (FEATS: a word without features), once training
    # has any other value in it; otherwise '_' is unannotated, as XPOS and LEMMA have it.
    underscore_is_value: ClassVar[bool] = False
    # value() reads the form (LEMMA's edit scripts); False: each class has one value
    values_read_form: ClassVar[bool] = False
    # the dictionary's longest suffix (lexicon); 0: seen forms only
    suffix_length: ClassVar[int] = SUFFIX_LENGTH

    def target(self, form: str, value: str) -> str:
        """The class of a word with ``form`` whose column holds ``value`` (never ``_``)."""
        return value

    def value(self, form: str, target: str) -> str | None:
        """The column's value for a word with ``form`` predicted as class ``target`` (None:
        written ``_``)."""
        return None if target == UNDERSCORE else target

    def targets(self, sentence: Sentence) -> list[str | None]:
        """The class of each word of ``sentence``; None where the column is ``_`` (unless
        ``underscore_is_value``: then ``_`` is the class of an empty value) and where its value
        is not annotation (``Sentence.untagged``)."""
        empty = UNDERSCORE if self.underscore_is_value else None
        targets = [empty if value is None else self.target(form, value)
                   for form, value in zip(sentence.forms, sentence.column(self.column))]
        return sentence.annotated(self.column, targets)

    def classes(self, sentences: Iterable[Sentence], *, max_classes: int) -> Vocab | None:
        """The classes of the training ``sentences``, most frequent first, at most
        ``max_classes`` of them (the rest are said in one log line and never predicted); None
        when the column is ``_`` on every word (the layer is then not trained and its column is
        written ``_``)."""
        if max_classes < 1:
            raise ValueError(f"model.layer_max_classes={max_classes}: must be >= 1")
        counts: Counter[str] = Counter()
        for sentence in sentences:
            counts.update(t for t in self.targets(sentence) if t is not None)
        if set(counts) <= {UNDERSCORE}:
            log.info("%s: the %s column is '_' on every training word: not predicted, written "
                     "'_'", self.name, self.column)
            return None
        kept = sorted(counts, key=lambda t: (-counts[t], t))[:max_classes]
        if len(kept) < len(counts):
            covered = sum(counts[t] for t in kept) / sum(counts.values())
            log.warning("%s: %d distinct %s classes in training; kept the %d most frequent "
                        "(model.layer_max_classes), covering %.1f%% of the annotated words; the "
                        "other %d are never predicted", self.name, len(counts), self.column,
                        len(kept), 100.0 * covered, len(counts) - len(kept))
        return Vocab(kept, name=self.name)

    def lexicon(self, sentences: Iterable[Sentence]) -> dict | None:
        """The layer's dictionary of the training ``sentences`` (None: no annotated word): the
        classes each form was seen with (``forms``) and, for the forms never seen, those of the
        training forms ending in the same suffix (``suffixes``: every suffix of up to
        ``suffix_length`` characters shorter than its form). Decoding picks the best-scoring
        class among those the dictionary allows a word (:meth:`allowed`).

        The dictionary is UDPipe 1's guesser (Straka et al., 2016) and the tag dictionaries of
        taggers since Ratnaparkhi (1996) put in front of the softmax head: on the dev sets of
        ta_ttb and hu_szeged it raised the release recipe's FEATS on seen words from 90.4/93.3%
        to 95.4/96.7% and on unseen ones from 63.2/72.0% to 71.3/78.9%, LEMMA's seen from
        89.5/96.1% to 99.5/98.7% and unseen from 57.8/74.9% to 71.7/78.7%
        (experiments/results/layer_dictionary.md; ``SUFFIX_LENGTH`` chosen there). A layer whose
        ``suffix_length`` is 0 has seen forms only.
        """
        seen: defaultdict[str, set[str]] = defaultdict(set)
        for sentence in sentences:
            for form, target in zip(sentence.forms, self.targets(sentence)):
                if target is not None:
                    seen[form].add(target)
        if not seen:
            return None
        suffixes: defaultdict[str, set[str]] = defaultdict(set)
        for form, targets in seen.items():
            for length in range(1, min(self.suffix_length, len(form) - 1) + 1):
                suffixes[form[-length:]].update(targets)
        return {"forms": FormTable.from_sets(seen), "suffixes": FormTable.from_sets(suffixes),
                "suffix_length": self.suffix_length}

    def allowed(self, form: str, lexicon: Mapping) -> list[str] | None:
        """The classes ``lexicon`` (:meth:`lexicon`) allows a word ``form``: those seen with the
        form, else with the longest suffix it shares with a training form; None: any class."""
        entry = self.entry(form, lexicon)
        return None if entry is None else lexicon[entry[0]][entry[1]]

    def entry(self, form: str, lexicon: Mapping) -> tuple[str, str] | None:
        """Where :meth:`allowed` reads ``form``'s classes: ``("forms", form)`` or
        ``("suffixes", suffix)``; None: nowhere (any class)."""
        if form in lexicon["forms"]:
            return "forms", form
        for length in range(min(lexicon["suffix_length"], len(form) - 1), 0, -1):
            suffix = form[-length:]
            if lexicon["suffixes"].get(suffix):
                return "suffixes", suffix
        return None

    def head(self, n_states: int, n_classes: int, classes: Sequence[str] | None = None) -> nn.Module:
        """``[B, N+1, n_states]`` encoder states -> ``[B, N+1, n_classes]`` class scores;
        ``classes``: the class strings (the vocabulary's tokens), for a head built from them."""
        return nn.Linear(n_states, n_classes)

    def loss(self, scores: Tensor, gold: Tensor) -> Tensor:
        """Mean cross-entropy of ``scores [B, N+1, C]`` over the words whose ``gold [B, N+1]``
        class is a kept one (id >= 3; -1 unannotated, UNK a class not kept)."""
        known = gold >= N_SPECIAL
        loss = nn.functional.cross_entropy(scores[known], gold[known], reduction="sum")
        return loss / known.sum().clamp(min=1)

    def predict(self, scores: Tensor) -> Tensor:
        """``[B, N+1]`` the best class of each position, never a special id."""
        return scores[..., N_SPECIAL:].argmax(-1) + N_SPECIAL

    def decode(self, forms: Sequence[Sequence[str]], scores: Tensor | ClassScores, classes: Vocab,
               lexicon: Mapping | Dictionary | None = None) -> list[list[str | None]]:
        """The column's values of each sentence's words ``forms[b]`` from their class ``scores
        [B, T, C]`` over the layer's ``classes`` (row ``b``: its words from position 0, no ROOT):
        each word's best class, among those ``lexicon`` allows it where it allows any that the head
        has (:meth:`allowed`; a :class:`Dictionary` of it remembers each form's classes across
        calls). One argmax per batch, not per sentence."""
        if lexicon is not None:
            dictionary = lexicon if isinstance(lexicon, Dictionary) else Dictionary(self, lexicon, classes)
            return dictionary.decode(forms, scores)
        best = [row[: len(words)] for row, words in zip(self.predict(class_scores(scores).full()).tolist(), forms)]
        names = classes.tokens
        return [[self.value(form, names[c]) for form, c in zip(words, ids)]
                for words, ids in zip(forms, best)]


class ClassScores(Protocol):
    """``[B, T, C]`` class scores read where needed (a model's lazy head:
    :class:`parser.models.layers.LinearScores`)."""

    def full(self) -> Tensor:
        """All of them, ``[B, T, C]``."""

    def rows(self, b: Tensor, t: Tensor) -> Tensor:
        """``[k, C]`` the scores of the positions ``(b[i], t[i])``."""

    def cells(self, b: Tensor, t: Tensor, c: Tensor) -> Tensor:
        """``[k]`` the scores of class ``c[i]`` at ``(b[i], t[i])``."""


class DenseScores:
    """:class:`ClassScores` of a computed ``[B, T, C]`` tensor."""

    def __init__(self, scores: Tensor) -> None:
        self.scores = scores

    def full(self) -> Tensor:
        return self.scores

    def rows(self, b: Tensor, t: Tensor) -> Tensor:
        return self.scores[b, t]

    def cells(self, b: Tensor, t: Tensor, c: Tensor) -> Tensor:
        return self.scores[b, t, c]


def class_scores(scores: Tensor | ClassScores) -> ClassScores:
    """``scores`` as :class:`ClassScores`: a computed tensor wrapped, a lazy head as it is."""
    return DenseScores(scores) if isinstance(scores, Tensor) else scores


class Dictionary:
    """A layer's lexicon (:meth:`TokenLayer.lexicon`) over its head's ``classes``: the class ids
    each form may take. What is computed per form is remembered for the lexicon's own forms only
    (at most ``MEMO``): a stream of new words (a service's, a web corpus's) never grows the memory
    of a process that runs for days, and a form outside the lexicon costs a few suffix lookups."""

    MEMO = 200_000

    def __init__(self, layer: TokenLayer, lexicon: Mapping, classes: Vocab) -> None:
        if "suffix_length" not in lexicon:  # a LEMMA lexicon of dc4d0bd: form -> lemma
            lexicon = {"forms": {form: [layer.target(form, lemma)] for form, lemma in lexicon.items()},
                       "suffixes": {}, "suffix_length": 0}
        self.layer, self.lexicon, self.classes = layer, lexicon, classes
        self._ids: dict[str, tuple[int, ...]] = {}
        self._class_ids: dict[tuple[str, ...], tuple[int, ...]] = {}
        self._class_values: list[str | None] | None = None
        self._values: dict[tuple[str, int], tuple[str | None]] = {}

    def best(self, forms: Sequence[Sequence[str]], scores: Tensor | ClassScores) -> list[list[int]]:
        """Each word's best class id by ``scores [B, T, C]`` (row ``b``: the words ``forms[b]``
        from position 0) among those its form may take (any, for a form the dictionary does not
        restrict), one list per sentence: :meth:`best_cells` split by sentence."""
        lengths = [len(words) for words in forms]
        flat = self.best_cells(forms, scores)[2].tolist()
        ends = np.cumsum(lengths).tolist()
        return [flat[end - n:end] for end, n in zip(ends, lengths)]

    def best_cells(self, forms: Sequence[Sequence[str]],
                   scores: Tensor | ClassScores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(b, position, class)`` of every word, in reading order, the class chosen as
        :meth:`best` says: the head's argmax over the rows of the unrestricted words, the best of
        each restricted word's classes from the scores of those classes alone (a
        :class:`ClassScores` computes only them: a LEMMA head has hundreds of classes, a known
        form two or three). Python touches each word once (its form's classes, remembered); the
        choices are numpy's (on EWT test, per-word Python here cost more than the convolutional
        encoder)."""
        source = class_scores(scores)
        lengths = np.fromiter(map(len, forms), dtype=np.int64, count=len(forms))
        remembered, ids_of = self._ids.get, self.ids
        ids = [remembered(form) or ids_of(form) for words in forms for form in words]
        counts = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        # each word's (sentence, position)
        b = np.repeat(np.arange(len(forms)), lengths)
        word = np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        best = np.empty(len(ids), dtype=np.int64)
        free = np.flatnonzero(counts == 0)
        if len(free):
            rows = source.rows(torch.from_numpy(b[free]), torch.from_numpy(word[free]))
            best[free] = self.layer.predict(rows).cpu().numpy()
        restricted = np.flatnonzero(counts)
        if len(restricted):
            # each cell's word: one class of a restricted word
            classes = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(counts.sum()))
            owner = np.repeat(np.arange(len(ids)), counts)
            values = source.cells(*(torch.from_numpy(a) for a in (b[owner], word[owner], classes)))
            values = values.detach().cpu().numpy()
            # the first cell (class order, as argmax) of each restricted word holding its maximum
            top = np.maximum.reduceat(values, (np.cumsum(counts) - counts)[restricted])
            at_top = np.flatnonzero(values == np.repeat(top, counts[restricted]))
            _, first = np.unique(owner[at_top], return_index=True)
            best[restricted] = classes[at_top[first]]
        return b, word, best

    def decode(self, forms: Sequence[Sequence[str]], scores: Tensor | ClassScores) -> list[list[str | None]]:
        """:meth:`TokenLayer.decode` through this dictionary: each word's value from its best
        class (:meth:`best`), remembered per class (or per form and class, for a layer whose
        values read the form)."""
        best = self.best(forms, scores)
        if not self.layer.values_read_form:
            values = self._class_values
            if values is None:
                values = self._class_values = [self.layer.value("", name) for name in self.classes.tokens]
            return [[values[c] for c in ids] for ids in best]
        names, remembered, value = self.classes.tokens, self._values, self.layer.value
        decoded = []
        for words, ids in zip(forms, best):
            row = []
            for form, c in zip(words, ids):
                found = remembered.get((form, c))
                if found is None:
                    found = (value(form, names[c]),)
                    if form in self.lexicon["forms"]:
                        if len(remembered) >= self.MEMO:
                            remembered.clear()
                        remembered[form, c] = found
                row.append(found[0])
            decoded.append(row)
        return decoded

    def ids(self, form: str) -> tuple[int, ...]:
        """The kept class ids ``form`` may take, in class order (empty: any). Remembered per form
        and per list of classes: the forms seen with the same classes (most of them: one tag, an
        identity lemma script) and the unseen ones sharing a suffix share the ids."""
        found = self._ids.get(form)
        if found is None:
            entry = self.layer.entry(form, self.lexicon)
            allowed = () if entry is None else tuple(self.lexicon[entry[0]][entry[1]])
            found = self._class_ids.get(allowed)
            if found is None:
                found = tuple(sorted(c for c in self.classes.indices(allowed) if c >= N_SPECIAL))
                if len(self._class_ids) < self.MEMO:
                    self._class_ids[allowed] = found
            if form in self.lexicon["forms"] and len(self._ids) < self.MEMO:
                self._ids[form] = found
        return found


def encode_targets(layer: TokenLayer, sentence: Sentence, classes: Vocab) -> Tensor | None:
    """``[n+1]`` long class ids of ``sentence``'s words (ROOT position 0 and ``_`` words: -1;
    classes not kept: UNK); None when the column is ``_`` on every word."""
    targets = layer.targets(sentence)
    if all(t is None for t in targets):
        return None
    get = classes.index
    return torch.tensor([-1] + [-1 if t is None else get(t) for t in targets], dtype=torch.long)
