"""Tests of parser-serve and its page."""

import conllu


def word_forms(result: str) -> list[list[str]]:
    """The word forms of each sentence of a CoNLL-U text (multiword token lines left out)."""
    return [[token["form"] for token in sentence if isinstance(token["id"], int)]
            for sentence in conllu.parse(result)]
