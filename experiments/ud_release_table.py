"""The table of ``experiments/results/ud_release.md``: a ``parser-release`` sweep's rows beside
UDPipe 1's (``experiments/udpipe_release.py``) and the CoNLL 2018 shared task's best LAS.

    PYTHONPATH=. python experiments/ud_release_table.py --sweep $RUNS/release --udpipe $RUNS/udpipe

The shared task (UD 2.2, 2018) scored older versions of these treebanks, from raw text: its
figures are for scale, not a comparison on the same files. Source: the official per-treebank LAS
tables (universaldependencies.org/conll18/results-las.html), the best system's F1; a treebank
missing here was not among the task's 82 test sets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from parser.eval.release_table import release_table

# treebank -> (best raw-text LAS F1, team)
CONLL2018_BEST_LAS = {
    "en_ewt": (84.57, "HIT-SCIR"), "en_pud": (87.89, "LATTICE"),
    "af_afribooms": (85.47, "HIT-SCIR"), "el_gdt": (89.65, "HIT-SCIR"),
    "hu_szeged": (82.66, "HIT-SCIR"), "kk_ktb": (31.93, "Uppsala"),
}


def read_json(folder: Path, pattern: str) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob(pattern))]


def table(sweep: Path, udpipe: Path) -> str:
    ours = read_json(sweep, "*/result.json")
    baseline = {r["code"]: r for r in read_json(udpipe, "*.json") if "skipped" not in r}
    codes = [r["treebank"] for r in ours]
    extra = {
        "UDPipe 1 raw LAS": {c: baseline[c]["raw"]["LAS"] for c in codes if c in baseline},
        "UDPipe 1 gold-token LAS": {c: baseline[c]["gold_tokens"]["LAS"] for c in codes
                                    if c in baseline},
        "CoNLL 2018 best LAS (UD 2.2)": {c: CONLL2018_BEST_LAS[c][0] for c in codes
                                         if c in CONLL2018_BEST_LAS},
    }
    listed = sweep / "skipped.json"  # written when the sweep ends
    skipped = json.loads(listed.read_text(encoding="utf-8")) if listed.is_file() else {}
    return release_table(ours, skipped=skipped, extra=extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", type=Path, required=True, help="parser-release's output=")
    parser.add_argument("--udpipe", type=Path, required=True, help="udpipe_release.py's --out")
    args = parser.parse_args(argv)
    print(table(args.sweep, args.udpipe))
    return 0


if __name__ == "__main__":
    sys.exit(main())
