"""What a run needs to know about a treebank, read from its files: its code and folder, its
language, the splits it distributes, whether its FORM column holds text, and which split is its
unlabeled text. No per-treebank config file is needed (docs/treebanks.md).

Whether a treebank has text is decided from the first sentences of one file (train, else test),
never by reading a whole file: a treebank whose texts are licensed apart (en_esl) has ``_`` in
every FORM of every file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from parser.data.paths import find_treebank
from parser.data.text_files import open_text

__all__ = [
    "MIN_CARVED_DEV",
    "TEXT_PROBE_SENTENCES",
    "TreebankInfo",
    "carved_dev_size",
    "forms_hold_text",
    "read_treebank_info",
    "training_refusal",
]

TEXT_PROBE_SENTENCES = 20
# A carved dev set smaller than this scores too few words to choose a model by (kk_ktb's 31
# training trees would give 3): no model selection then, the last step's model is kept.
MIN_CARVED_DEV = 20
_WORD_ID = re.compile(r"^\d+(-\d+)?\t")  # a word or multiword-token line, not an empty node
_OFFICIAL = re.compile(r"^UD_(?P<language>[^-]+)-")


@dataclass(frozen=True)
class TreebankInfo:
    """A treebank as its files describe it.

    ``files``: the file of each split present, in ``train, dev, test`` order; ``has_text``:
    False when every FORM of the first sentences of ``probe`` is ``_``.
    """

    code: str
    folder: Path
    language: str
    files: dict[str, Path]
    has_text: bool
    probe: Path

    @property
    def splits(self) -> tuple[str, ...]:
        return tuple(self.files)

    @property
    def unlabeled_split(self) -> str:
        """The split a run without trees can read as text: train where it is distributed, else
        dev, else test (transductive: its words, never its trees). ``data.unlabeled_split``
        defaults to train; another split is a choice the run's config must record."""
        return self.splits[0]

    def describe(self) -> str:
        """One line for the run log: ``hu_szeged (UD_Hungarian-Szeged, Hungarian): train, dev,
        test``."""
        return f"{self.code} ({self.folder.name}, {self.language}): {', '.join(self.splits)}"

    def require_text(self) -> None:
        """ValueError naming the treebank and why, when its FORM column holds no text."""
        if not self.has_text:
            raise ValueError(
                f"treebank {self.code} ({self.folder}): every FORM of the first "
                f"{TEXT_PROBE_SENTENCES} sentences of {self.probe.name} is '_' (its text is "
                "distributed apart from the annotation): there is no text to train on or parse; "
                "merge the text into the FORM column first, or leave this treebank out"
            )

    def require_train(self, *, root: Path) -> None:
        """ValueError saying what the treebank can be used for when it has no training file."""
        if "train" in self.files:
            return
        if self.splits == ("test",):
            raise ValueError(
                f"{self.code} has no 'train' split (available: test) in {self.folder}: a test "
                "set only, nothing to train on; it can only be evaluated with a model trained "
                f"elsewhere (on another {self.language} treebank), e.g. parser-evaluate "
                f"checkpoint=<that run>/checkpoints/best.pt treebank={self.code} split=test "
                f"root={root}"
            )
        raise ValueError(
            f"{self.code} has no 'train' split (available: {', '.join(self.splits)}) in "
            f"{self.folder}: train without trees on its text (experiment=ge_alone "
            f"data.treebank={self.code} data.unlabeled_split={self.unlabeled_split}), or on "
            f"another split's trees (data.train_split={self.unlabeled_split})"
        )


def training_refusal(info: TreebankInfo, *, root: Path) -> str | None:
    """Why ``info``'s treebank cannot be trained on (the message of :meth:`TreebankInfo.
    require_text` or :meth:`~TreebankInfo.require_train`), or None: what a release sweep
    reports for the treebanks it skips."""
    try:
        info.require_text()
        info.require_train(root=root)
    except ValueError as refusal:
        return str(refusal)
    return None


def language_of(folder: Path, code: str) -> str:
    """``Hungarian`` from ``UD_Hungarian-Szeged``, ``Ancient Greek`` from
    ``UD_Ancient_Greek-PROIEL``; the code's prefix (``hu``) in the ``<code>/`` layout.

    >>> language_of(Path("UD_Ancient_Greek-PROIEL"), "grc_proiel"), language_of(Path("hu_szeged"), "hu_szeged")
    ('Ancient Greek', 'hu')
    """
    match = _OFFICIAL.match(folder.name)
    return match["language"].replace("_", " ") if match else code.split("_", 1)[0]


def forms_hold_text(path: str | os.PathLike, *, sentences: int = TEXT_PROBE_SENTENCES) -> bool:
    """Whether a word of the first ``sentences`` sentences of ``path`` has a FORM other than
    ``_`` (reads those sentences only). A file with no word line at all has no text either."""
    seen = 0
    with open_text(path, encoding="utf-8-sig") as lines:
        for line in lines:
            if not line.strip():
                seen += 1
                if seen >= sentences:
                    break
            elif _WORD_ID.match(line):
                columns = line.split("\t", 2)
                if len(columns) > 1 and columns[1] != "_":
                    return True
    return False


def read_treebank_info(root: str | os.PathLike, name: str) -> TreebankInfo:
    """The treebank named ``name`` (code or folder name) under ``root``, described from its
    files: a directory listing, and the first sentences of its train file (else test, else dev).
    """
    found = find_treebank(root, name)
    probe = next(found.files[s] for s in ("train", "test", "dev") if s in found.files)
    return TreebankInfo(
        code=found.code, folder=found.folder, language=language_of(found.folder, found.code),
        files=found.files, has_text=forms_hold_text(probe), probe=probe,
    )


def carved_dev_size(n_train: int, *, fraction: float) -> int:
    """How many of the last training sentences form the dev set of a treebank without a dev
    file: ``round(fraction * n_train)``, or 0 (no model selection) when that is under
    ``MIN_CARVED_DEV``.

    >>> carved_dev_size(1000, fraction=0.1), carved_dev_size(31, fraction=0.1)
    (100, 0)
    """
    if not 0 <= fraction < 1:
        raise ValueError(f"data.dev_fraction={fraction}: must be in [0, 1)")
    size = round(fraction * n_train)
    return size if size >= MIN_CARVED_DEV else 0

