"""Vocabularies: strings to ids, with three reserved ids shared by every vocabulary.

``PAD = 0`` fills padding, ``UNK = 1`` stands for anything unseen in training, ``ROOT = 2`` is the
token at position 0 of every sentence. Real entries start at ``N_SPECIAL = 3``, ordered by
decreasing count then alphabetically, so a vocabulary built twice from the same data is the same.
Relations use the same layout: ids 0..2 are never gold, and a label scorer may mask them.

State dicts are plain lists and dicts so checkpoints stay loadable without this code's classes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from parser.data.conllu_io import Sentence
from parser.data.form_table import FormTable

if TYPE_CHECKING:  # the layers import this module (Vocab): their type only
    from parser.data.layers.base import TokenLayer

__all__ = ["N_SPECIAL", "PAD", "ROOT", "SPECIALS", "UNK", "Vocab", "Vocabularies"]

PAD, UNK, ROOT = 0, 1, 2
N_SPECIAL = 3
SPECIALS = ("<pad>", "<unk>", "<root>")


class Vocab:
    """A bijection between strings and ids, with UNK fallback on lookup.

    >>> vocab = Vocab.build({"the": 5, "dog": 2, "cat": 1}, min_freq=2, name="words")
    >>> vocab.tokens
    ['<pad>', '<unk>', '<root>', 'the', 'dog']
    >>> vocab.index("dog"), vocab.index("cat")
    (4, 1)
    """

    PAD, UNK, ROOT = PAD, UNK, ROOT

    def __init__(self, tokens: Iterable[str] = (), *, name: str = "vocab") -> None:
        self.name = name
        self._tokens = list(SPECIALS)
        self._ids = {token: i for i, token in enumerate(self._tokens)}
        for token in tokens:
            if not isinstance(token, str):
                raise TypeError(f"vocab {name!r}: entry {token!r} is not a string")
            if token in self._ids:
                raise ValueError(f"vocab {name!r}: duplicate entry {token!r}")
            self._ids[token] = len(self._tokens)
            self._tokens.append(token)

    @classmethod
    def build(cls, counts: Mapping[str, int], *, min_freq: int = 1, name: str = "vocab") -> Vocab:
        """Entries seen at least ``min_freq`` times, most frequent first (ties alphabetical)."""
        if min_freq < 1:
            raise ValueError(f"vocab {name!r}: min_freq must be >= 1, got {min_freq}")
        kept = [t for t, c in counts.items() if c >= min_freq and t not in SPECIALS]
        kept.sort(key=lambda t: (-counts[t], t))
        return cls(kept, name=name)

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._ids

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self._tokens == other._tokens

    def __repr__(self) -> str:
        return f"Vocab({self.name!r}, {len(self)} entries)"

    @property
    def tokens(self) -> list[str]:
        return list(self._tokens)

    def index(self, token: str | None) -> int:
        """The id of ``token``; UNK when unseen or None."""
        return self._ids.get(token, UNK)

    def indices(self, tokens: Iterable[str | None]) -> list[int]:
        get = self._ids.get
        return [get(t, UNK) for t in tokens]

    def token(self, index: int) -> str:
        if not 0 <= index < len(self._tokens):
            raise ValueError(f"vocab {self.name!r}: id {index} out of range 0..{len(self) - 1}")
        return self._tokens[index]

    def count_unknown(self, tokens: Iterable[str | None]) -> tuple[int, int]:
        """(number of tokens not in the vocabulary, number of tokens)."""
        unknown = total = 0
        for token in tokens:
            total += 1
            unknown += token not in self._ids
        return unknown, total

    def state_dict(self) -> dict:
        """The tokens as one string, one a line: torch's weights-only unpickler reads a list of
        EWT's 20,000 words in 17 ms, the string in well under one (a prediction's start-up)."""
        broken = next((token for token in self._tokens if "\n" in token), None)
        if broken is not None:  # a CoNLL-U value holds no newline
            raise ValueError(f"vocab {self.name!r}: token {broken!r} holds a newline")
        return {"name": self.name, "tokens": "\n".join(self._tokens)}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> Vocab:
        """Also the state written before the tokens were joined (a list)."""
        tokens = state.get("tokens", ())
        tokens = tokens.split("\n") if isinstance(tokens, str) else list(tokens)
        if tuple(tokens[:N_SPECIAL]) != SPECIALS:
            raise ValueError(f"vocab state {state.get('name')!r}: must start with {SPECIALS}, "
                             f"got {tokens[:N_SPECIAL]}")
        return cls(tokens[N_SPECIAL:], name=str(state.get("name", "vocab")))


@dataclass(frozen=True)
class Vocabularies:
    """Word forms (case kept, frequency cut-off), characters, UPOS tags and relations, and the
    classes of each token-level layer the model predicts (``layers``, by layer name:
    :mod:`parser.data.layers`; a layer whose column training left all ``_`` has none) and the
    dictionaries they decode with (``lexicons``: :meth:`parser.data.layers.TokenLayer.lexicon`).

    Relations are kept whole (``nmod:poss``); :meth:`rel_universal_ids` maps each to its
    universal part for LAS as CoNLL 2018 scores it.

    ``vectors``: the words of the pretrained vector rows a parser keeps (``model.vectors``,
    :mod:`parser.data.vectors`; their matrix is the model's), ``vector_dim`` their dimension;
    None and 0 without vectors. A form reads its row, else its lowercased form's, else UNK
    (:meth:`vector_ids`).
    """

    words: Vocab
    chars: Vocab
    upos: Vocab
    rels: Vocab
    layers: Mapping[str, Vocab] = field(default_factory=dict)
    lexicons: Mapping[str, Mapping] = field(default_factory=dict)
    vectors: Vocab | None = None
    vector_dim: int = 0
    # what decoding derives from them once per model (the layers' Dictionary objects); not state
    derived: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    @classmethod
    def build(cls, sentences: Iterable[Sentence], *, min_freq: int = 2,
              layers: Sequence[TokenLayer] = (), max_classes: int = 1000,
              tag_dictionary: TokenLayer | None = None) -> Vocabularies:
        """Vocabularies of the training ``sentences``; words need ``min_freq`` occurrences,
        characters, tags and relations one; each of ``layers`` keeps at most ``max_classes``
        classes (:meth:`parser.data.layers.TokenLayer.classes`), from the sentences with heads;
        ``tag_dictionary``: the UPOS dictionary of a parser that tags its own words
        (``lexicons["upos"]``, :class:`parser.data.layers.UposColumn`)."""
        sentences = list(sentences)
        words: Counter[str] = Counter()
        upos: Counter[str] = Counter()
        rels: Counter[str] = Counter()
        for sentence in sentences:
            words.update(sentence.forms)
            upos.update(t for t in sentence.upos if t is not None)
            rels.update(r for r in sentence.deprels if r is not None)
        chars: Counter[str] = Counter()
        for form, count in words.items():
            for char in form:
                chars[char] += count
        # a layer learns from the trees' words only (encode gives targets to them alone)
        trees = [s for s in sentences if any(h >= 0 for h in s.heads)]
        classes = {layer.name: layer.classes(trees, max_classes=max_classes) for layer in layers}
        lexicons = {layer.name: layer.lexicon(trees) for layer in layers
                    if classes[layer.name] is not None}
        if tag_dictionary is not None:
            lexicons[tag_dictionary.name] = tag_dictionary.lexicon(trees)
        return cls(Vocab.build(words, min_freq=min_freq, name="words"),
                   Vocab.build(chars, name="chars"), Vocab.build(upos, name="upos"),
                   Vocab.build(rels, name="rels"),
                   {name: vocab for name, vocab in classes.items() if vocab is not None},
                   {name: lexicon for name, lexicon in lexicons.items() if lexicon})

    def vector_ids(self, forms: Iterable[str]) -> list[int]:
        """The vector row of each form: its own, else its lowercased form's, else UNK.

        >>> vocabs = Vocabularies(*(Vocab() for _ in range(4)), vectors=Vocab(["the", "cat"]))
        >>> vocabs.vector_ids(["The", "cat", "Cat", "dog"])
        [3, 4, 4, 1]
        """
        if self.vectors is None:
            raise ValueError("these vocabularies hold no vector rows (a parser without model.vectors)")
        get = self.vectors._ids.get
        return [get(form) or get(form.lower(), UNK) for form in forms]

    def rel_universal_ids(self) -> Tensor:
        """``[L]`` long: for each relation id, an id shared by all relations with the same part
        before ``':'`` (``nmod`` and ``nmod:poss`` get the same); specials map to themselves.
        Compare ``ids[pred] == ids[gold]`` to score LAS ignoring subtypes."""
        universal = sorted({t.split(":", 1)[0] for t in self.rels.tokens[N_SPECIAL:]})
        position = {t: N_SPECIAL + i for i, t in enumerate(universal)}
        ids = list(range(N_SPECIAL))
        ids += [position[t.split(":", 1)[0]] for t in self.rels.tokens[N_SPECIAL:]]
        return torch.tensor(ids, dtype=torch.long)

    def unknown_rates(self, sentences: Iterable[Sentence]) -> dict[str, float]:
        """Share of word tokens, characters, tags and relations in ``sentences`` unseen in the
        vocabularies (unannotated tags and relations not counted), for the trainer to log."""
        counts = {name: [0, 0] for name in ("words", "chars", "upos", "rels")}
        for sentence in sentences:
            for name, vocab, tokens in (
                    ("words", self.words, sentence.forms),
                    ("chars", self.chars, (c for form in sentence.forms for c in form)),
                    ("upos", self.upos, (t for t in sentence.upos if t is not None)),
                    ("rels", self.rels, (r for r in sentence.deprels if r is not None))):
                unknown, total = vocab.count_unknown(tokens)
                counts[name][0] += unknown
                counts[name][1] += total
        return {name: unknown / total if total else 0.0 for name, (unknown, total) in
                counts.items()}

    def state_dict(self) -> dict:
        state = {name: getattr(self, name).state_dict() for name in _FIELDS}
        if self.layers:  # absent otherwise: a layer-free model's state is as before layers
            state["layers"] = {name: vocab.state_dict() for name, vocab in self.layers.items()}
        if self.lexicons:
            state["lexicons"] = {name: _lexicon_state(lexicon) for name, lexicon in self.lexicons.items()}
        if self.vectors is not None:  # absent otherwise: as before vectors
            state["vectors"] = {**self.vectors.state_dict(), "dim": self.vector_dim}
        return state

    @classmethod
    def from_state_dict(cls, state: Mapping) -> Vocabularies:
        """The vocabularies of a checkpoint; one written before token-level layers has none."""
        missing = [name for name in _FIELDS if name not in state]
        if missing:
            raise ValueError(f"vocabularies state: missing {missing}")
        layers = {name: Vocab.from_state_dict(layer)
                  for name, layer in (state.get("layers") or {}).items()}
        lexicons = {name: _lexicon_from_state(lexicon)
                    for name, lexicon in (state.get("lexicons") or {}).items()}
        vectors = state.get("vectors")
        return cls(*(Vocab.from_state_dict(state[name]) for name in _FIELDS), layers, lexicons,
                   None if vectors is None else Vocab.from_state_dict(vectors),
                   0 if vectors is None else int(vectors["dim"]))

    def sizes(self) -> dict[str, int]:
        """Sizes of the four base vocabularies (``layer_sizes``: the layers'), and with vector
        rows their number (``vectors``, the specials included) and dimension (``vector_dim``)."""
        sizes = {name: len(getattr(self, name)) for name in _FIELDS}
        if self.vectors is not None:
            sizes.update(vectors=len(self.vectors), vector_dim=self.vector_dim)
        return sizes

    def layer_sizes(self) -> dict[str, int]:
        """The number of classes of each layer, by name."""
        return {name: len(vocab) for name, vocab in self.layers.items()}


_FIELDS: Sequence[str] = ("words", "chars", "upos", "rels")


def _lexicon_state(lexicon: Mapping) -> dict:
    """A layer's dictionary with its form tables packed (:class:`FormTable`)."""
    return {key: value.pack() if isinstance(value, FormTable) else value
            for key, value in lexicon.items()}


def _lexicon_from_state(state: Mapping) -> dict:
    """Also the dictionaries written before the tables were packed (dicts of lists) and a LEMMA
    lexicon of dc4d0bd (form -> lemma, no ``suffix_length``: kept as it is)."""
    if "suffix_length" not in state:
        return dict(state)
    return {key: FormTable.unpack(value) if isinstance(value, str) else
            FormTable.from_sets(value) if isinstance(value, Mapping) else value
            for key, value in state.items()}
