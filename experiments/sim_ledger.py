"""The annotation simulation's finished rounds, kept in the repository: a round's run folder
(checkpoints, predictions) lives outside the repository and, on these machines, does not outlive
the session, while the issue's three seeds take several sessions. So every finished round
leaves one line in ``<ledger>/<treebank>.jsonl`` (committed): its arm, seed, round, annotated
words, test LAS, the seconds its steps took, and its test prediction's per-sentence counts
(heads right, heads and relations right), which is all the report and the paired bootstrap
read. The words of each test sentence come from the gold file at report time.

``<ledger>/settings.json`` holds the simulation's settings (the options that change what a
round means); a ledger is refused by a run with other settings, as a run folder is.

>>> record = {"arm": "random", "seed": 1, "round": 0, "words": 10, "las": 50.0, "uas": 60.0,
...           "folder": "s1/r0", "seconds": {"train": 1.0}, "heads": [3, 2], "labels": [2, 1]}
>>> key(record)
('random', 1, 0)
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from parser.runtime.io_atomic import atomic_write

FIELDS = ("arm", "seed", "round", "words", "las", "uas", "folder", "seconds", "heads", "labels")
OPTIONAL = ("upos",)  # kept where a record has it (rounds scored before it was recorded lack it)


def key(record: dict) -> tuple[str, int, int]:
    return record["arm"], record["seed"], record["round"]


def check_settings(path: Path, settings: dict, *, write: bool,
                   instead: str = "another folder") -> None:
    """Refuse ``path`` (a ``settings.json``) written with other ``settings`` (the message
    suggests ``instead``); write it when new."""
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        differ = [f"--{k.replace('_', '-')} {before.get(k)} (now {v})" for k, v in settings.items()
                  if before.get(k) != v]
        if differ:
            raise SystemExit(f"{path.parent} was made with {', '.join(differ)}: its rounds mean "
                             f"other things; use {instead} or the same options")
    elif write:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")


def read(path: Path) -> list[dict]:
    """The records of one treebank's ledger file (none when it does not exist); a line that is
    not a record raises ValueError naming the file and line."""
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
        missing = [field for field in FIELDS if field not in record]
        if missing:
            raise ValueError(f"{path}:{number}: a round without {', '.join(missing)}")
        records.append(record)
    return records


def merge(path: Path, records: list[dict]) -> list[dict]:
    """The ledger file's records with ``records`` added (a round already there is replaced),
    sorted by arm, seed and round and written back atomically; returns them."""
    merged = {key(record): record for record in read(path)}
    merged.update((key(record), record) for record in records)
    ordered = [merged[k] for k in sorted(merged)]
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as out:
        out.writelines(json.dumps({field: record[field] for field in (*FIELDS, *OPTIONAL)
                                   if field in record},
                                  separators=(",", ":")) + "\n" for record in ordered)
    return ordered


def counts(record: dict, sentence_words: np.ndarray, *, where: str) -> np.ndarray:
    """``[S, 3]`` sentence counts (words, heads right, heads and relations right) of a record,
    the words from the gold file; a record of another number of sentences raises ValueError."""
    heads, labels = np.asarray(record["heads"]), np.asarray(record["labels"])
    if not len(heads) == len(labels) == len(sentence_words):
        raise ValueError(f"{where}: {key(record)} has {len(heads)} sentences, the gold test file "
                         f"{len(sentence_words)}")
    return np.stack([sentence_words, heads, labels], axis=1).astype(np.int64)
