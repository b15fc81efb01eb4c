"""The classes each training form (or suffix) was seen with, as a layer's dictionary holds them
(:meth:`parser.data.layers.TokenLayer.lexicon`; :class:`parser.data.vocab.Vocabularies` saves
it), in a shape that loads fast.

A checkpoint keeps each table as one string, forms and their classes on alternate lines, the
classes joined by the unit separator: torch's weights-only unpickler read the same tables as
dicts of lists at about 30 us an entry (3.4 s for EWT's four layers, most of a prediction's
start), the string in milliseconds. In memory a form's classes stay joined until asked for.

>>> table = FormTable.from_sets({"saw": {"VBD", "NN"}, "the": {"DT"}})
>>> table["saw"], FormTable.unpack(table.pack()) == table
(['NN', 'VBD'], True)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain

__all__ = ["FormTable"]

_SEPARATOR = "\x1f"  # between a form's classes: no CoNLL-U value holds it


class FormTable(Mapping[str, list[str]]):
    """Form -> the sorted classes it was seen with."""

    def __init__(self, joined: dict[str, str]) -> None:
        self._joined = joined

    @classmethod
    def from_sets(cls, classes_of: Mapping[str, Iterable[str]]) -> FormTable:
        return cls({form: _SEPARATOR.join(sorted(classes)) for form, classes in classes_of.items()})

    def __getitem__(self, form: str) -> list[str]:
        return self._joined[form].split(_SEPARATOR)

    def __contains__(self, form: object) -> bool:
        return form in self._joined

    def get(self, form: str, default: list[str] | None = None) -> list[str] | None:
        # Mapping.get would raise and catch a KeyError per miss (a suffix search misses often)
        joined = self._joined.get(form)
        return default if joined is None else joined.split(_SEPARATOR)

    def __iter__(self) -> Iterator[str]:
        return iter(self._joined)

    def __len__(self) -> int:
        return len(self._joined)

    def pack(self) -> str:
        """One string: form, classes, form, classes, ... on alternate lines (forms hold no
        newline: a CoNLL-U line does not)."""
        return "\n".join(chain.from_iterable(self._joined.items()))

    @classmethod
    def unpack(cls, packed: str) -> FormTable:
        if not packed:
            return cls({})
        lines = packed.split("\n")
        if len(lines) % 2:
            raise ValueError(f"a packed form table has {len(lines)} lines: a form without its classes")
        return cls(dict(zip(lines[0::2], lines[1::2])))
