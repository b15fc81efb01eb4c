"""Sentences for the picture tests."""

from __future__ import annotations

import pytest


def conllu(rows: list[str], *, sent_id: str = "t1", text: str | None = None) -> str:
    """A CoNLL-U block from ``form head deprel [misc]`` rows (LEMMA the form, UPOS X)."""
    lines = [f"# sent_id = {sent_id}"] + ([f"# text = {text}"] if text else [])
    for i, row in enumerate(rows, start=1):
        form, head, deprel, *misc = row.split()
        lines.append(f"{i}\t{form}\t{form.lower()}\tX\t_\tCase=Nom|Number=Sing\t{head}\t{deprel}"
                     f"\t_\t{misc[0] if misc else '_'}")
    return "\n".join(lines) + "\n\n"


@pytest.fixture
def simple() -> str:
    return conllu(["The 2 det", "dog 3 nsubj", "barks 0 root", ". 3 punct"],
                  text="The dog barks.")
