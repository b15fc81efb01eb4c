"""The multiword table's remembered splits (parser.tokenize.multiword)."""

from __future__ import annotations

from parser.tokenize import multiword
from parser.tokenize.multiword import MultiwordTable
from parser.tokenize.text import Token


def test_a_remembered_split_is_the_split_and_memory_stays_bounded(monkeypatch):
    table = MultiwordTable.build([[[Token("du", True, ("de", "le")), Token("chat", True, ("chat",))]]])
    first = [table.split(form) for form in ("Du", "DU", "du", "chat", "Chats")]
    assert [table.split(form) for form in ("Du", "DU", "du", "chat", "Chats")] == first
    assert first[:3] == [("De", "le"), ("DE", "LE"), ("de", "le")]
    monkeypatch.setattr(multiword, "REMEMBERED", 2)
    fresh = MultiwordTable.build([[[Token("du", True, ("de", "le"))]]])
    assert [fresh.split(f"w{i}") for i in range(5)] == [(f"w{i}",) for i in range(5)]
    assert len(fresh._remembered) == 2
