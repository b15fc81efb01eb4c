"""The screenshots of docs/pictures.md: three pages drawn by ``parser.view`` from the shared UD
test files, rendered by headless Chromium.

    python experiments/pictures.py --out docs/img [--root /path/to/ud] [--chromium chromium]

- ``tree_confidence.png``: EWT test sentence with a non-projective arc, its gold tree given a
  confidence MISC written by hand (no trained English model on the machine that made the
  figure): HeadProb/DeprelProb on every word, and a runner-up head (AltHead/AltHeadProb) on
  the doubtful ones; one head changed to a wrong one and drawn against the gold tree;
- ``tree_arabic.png``: an Arabic PADT test sentence (right to left, a multiword token);
- ``tree_french.png``: a French GSD test sentence with the multiword tokens ``du`` and ``au``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from pathlib import Path

from parser.data.conllu_io import format_sentence, read_conllu
from parser.data.paths import resolve_ud_root
from parser.view import page_html

EWT_ID = "weblog-blogspot.com_grandpasgripes_20060413051000_ENG_20060413_051000-0009"
ARABIC_LINE = 438  # first line of the PADT test sentence drawn
FRENCH_WORDS = ("du", "au")

# word -> (HeadProb, DeprelProb, runner-up head or None, its probability): plausible values
# ("Many people want to use diplomacy with Iran rather than military pressure .")
CONFIDENCE = {1: (0.97, 0.95, None, None), 2: (0.99, 0.98, None, None),
              3: (0.99, 1.0, None, None), 4: (0.96, 0.97, None, None),
              5: (0.98, 0.96, None, None), 6: (0.99, 0.95, None, None),
              7: (0.93, 0.99, None, None), 8: (0.71, 0.84, 6, 0.24),
              9: (0.52, 0.88, 12, 0.41), 10: (0.81, 0.9, 12, 0.12),
              11: (0.97, 0.66, None, None), 12: (0.58, 0.62, 5, 0.33),
              13: (0.99, 1.0, None, None)}
WRONG_HEAD = (9, 5)  # (word, head): the "prediction" attaches 'rather' (9) to 'use' (5)
WRONG_LABEL = (11, "nmod")  # and calls 'military' (11) nmod


def main() -> None:
    args = _args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = resolve_ud_root(args.root)
    with tempfile.TemporaryDirectory() as tmp:
        pages = {
            "tree_confidence": _english(root),
            "tree_arabic": ([_arabic(root)], None),
            "tree_french": ([_french(root)], None),
        }
        for name, (sentences, gold) in pages.items():
            page = Path(tmp) / f"{name}.html"
            page.write_text(page_html(sentences, gold=gold, title=name), encoding="utf-8")
            width = int(re.search(r'<svg [^>]*width="(\d+)"', page.read_text()).group(1)) + 80
            subprocess.run([args.chromium, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", f"--window-size={width},{args.height}",
                            f"--screenshot={out / (name + '.png')}", page.as_uri()],
                           check=True, capture_output=True)
            print(out / f"{name}.png")


def _english(root: Path):
    gold = next(s for s in read_conllu(root / "en_ewt" / "en_ewt-ud-test.conllu")
                if s.sent_id == EWT_ID)
    heads = list(gold.heads)
    word, head = WRONG_HEAD
    heads[word - 1] = head
    misc = []
    for i in range(1, len(gold) + 1):
        p_head, p_label, alt, p_alt = CONFIDENCE[i]
        entry = {"HeadProb": f"{p_head:.4f}", "DeprelProb": f"{p_label:.4f}"}
        if alt is not None:
            entry |= {"AltHead": str(alt), "AltHeadProb": f"{p_alt:.4f}"}
        misc.append(entry)
    deprels = list(gold.deprels)
    deprels[WRONG_LABEL[0] - 1] = WRONG_LABEL[1]
    predicted = format_sentence(gold, heads=heads, deprels=deprels, misc=misc)
    return [predicted], [gold]


def _arabic(root: Path):
    return next(s for s in read_conllu(root / "ar_padt" / "ar_padt-ud-test.conllu")
                if s.line == ARABIC_LINE)


def _french(root: Path):
    for sentence in read_conllu(root / "fr_gsd" / "fr_gsd-ud-test.conllu"):
        tokens = {raw.split("\t")[1] for raw in sentence.lines
                  if not raw.startswith("#") and "-" in raw.split("\t")[0]}
        if all(word in tokens for word in FRENCH_WORDS) and len(sentence) <= 16:
            return sentence
    raise SystemExit("no French GSD test sentence with du and au of at most 16 words")


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="docs/img")
    parser.add_argument("--root", default=None, help="UD data root (default: $UD_ROOT, data/ud)")
    parser.add_argument("--chromium", default="chromium")
    parser.add_argument("--height", type=int, default=520)
    return parser.parse_args()


if __name__ == "__main__":
    main()
