"""A real prediction file: EWT dev with heads and relations corrupted deterministically, still
valid trees (the official script rejects cycles), written with ``conllu``."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import conllu
import pytest


@dataclass(frozen=True)
class Corrupted:
    gold: Path
    pred: Path
    words: int           # syntactic words (all annotated in EWT)
    head_correct: int    # counted in plain Python while corrupting
    labeled_correct: int  # head right and universal relation right
    label_correct: int
    subtype_changes: int  # relation changed only after ':' (must not cost LAS)
    gold_sentences: list  # conllu TokenLists of the gold file
    pred_sentences: list  # conllu TokenLists serialised into the prediction file


def descendants(word: int, heads: dict[int, int]) -> set[int]:
    below, frontier = {word}, [word]
    while frontier:
        parent = frontier.pop()
        for child, head in heads.items():
            if head == parent and child not in below:
                below.add(child)
                frontier.append(child)
    return below


def corrupt(sentences, rng: random.Random, relations: list[str]) -> int:
    """Re-attach 15% of non-root words to a random non-descendant (so the tree stays a tree),
    replace 10% of relations by random ones, change 10% only in their subtype. Returns the number
    of subtype-only changes."""
    subtype_changes = 0
    for sentence in sentences:
        words = [t for t in sentence if isinstance(t["id"], int)]
        heads = {t["id"]: t["head"] for t in words}
        for token in words:
            if token["head"] != 0 and rng.random() < 0.15:
                allowed = sorted(set(heads) - descendants(token["id"], heads) - {token["head"]})
                if allowed:
                    token["head"] = heads[token["id"]] = rng.choice(allowed)
            draw = rng.random()
            if draw < 0.10:
                token["deprel"] = rng.choice(relations)
            elif draw < 0.20:
                base, _, subtype = token["deprel"].partition(":")
                token["deprel"] = base if subtype else f"{base}:xtest"
                subtype_changes += 1
    return subtype_changes


@pytest.fixture(scope="session")
def corrupted_dev(ud_root: Path, tmp_path_factory) -> Corrupted:
    gold_path = ud_root / "en_ewt" / "en_ewt-ud-dev.conllu"
    text = gold_path.read_text(encoding="utf-8")
    gold, pred = conllu.parse(text), conllu.parse(text)
    relations = sorted({t["deprel"] for s in gold for t in s if isinstance(t["id"], int)})
    subtype_changes = corrupt(pred, random.Random(2018), relations)
    pred_path = tmp_path_factory.mktemp("eval") / "en_ewt-dev-pred.conllu"
    pred_path.write_text("".join(s.serialize() for s in pred), encoding="utf-8")

    words = head = labeled = label = 0
    for g_sent, p_sent in zip(gold, pred):
        for g, p in zip(g_sent, p_sent):
            if not isinstance(g["id"], int):
                continue
            words += 1
            head_ok = g["head"] == p["head"]
            label_ok = g["deprel"].split(":")[0] == p["deprel"].split(":")[0]
            head += head_ok
            label += label_ok
            labeled += head_ok and label_ok
    return Corrupted(gold_path, pred_path, words, head, labeled, label, subtype_changes, gold, pred)
