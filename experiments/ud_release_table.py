"""The tables of ``experiments/results/ud_release.md``: a ``parser-release`` sweep's rows beside
UDPipe 1's (``experiments/udpipe_release.py``), UDPipe 2's published figures and the CoNLL 2018
shared task's best LAS.

    PYTHONPATH=. python experiments/ud_release_table.py --sweep $RUNS/release --udpipe $RUNS/udpipe
    # UDPipe 1's figures read back from an earlier table (its runs' folder gone)
    PYTHONPATH=. python experiments/ud_release_table.py --sweep $RUNS/release \\
        --udpipe experiments/results/ud_release_layers.md
    # and two recipes against each other: this sweep - another one (with its rescored folder)
    PYTHONPATH=. python experiments/ud_release_table.py --sweep $RUNS/lean --udpipe $RUNS/udpipe \
        --against $RUNS/release --against-rescored $RUNS/rescored --against-name release_cpu

Printed: the sweep's own table (segmentation, UPOS, UAS/LAS, gold-token UAS/LAS, training
minutes) with UDPipe 1's LAS and the CoNLL 2018 best LAS beside it; then, from raw text, a table
per group of metrics (tags; features and lemmas; UAS/LAS/CLAS; MLAS/BLEX), each metric with a
column for ours, UDPipe 1 and UDPipe 2; then ours - UDPipe 1 for Lemmas, UFeats, MLAS, BLEX and
LAS. Their last row is the macro average over the treebanks with at least 400 training sentences.
A figure a json lacks (an older ``result.json`` or ``udpipe_release.py`` output, which stop at
Tokens, Sentences, Words, UPOS, UAS and LAS) or a source does not publish is blank.

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

from parser.eval.official import METRICS
from parser.eval.release_table import comparison_tables, difference_table, release_table

# treebank -> (best raw-text LAS F1, team)
CONLL2018_BEST_LAS = {
    "en_ewt": (84.57, "HIT-SCIR"), "en_pud": (87.89, "LATTICE"),
    "af_afribooms": (85.47, "HIT-SCIR"), "el_gdt": (89.65, "HIT-SCIR"),
    "hu_szeged": (82.66, "HIT-SCIR"), "kk_ktb": (31.93, "Uppsala"),
}

# UDPipe 2, the upper anchor: its published test F1 from raw text ("Raw text" rows, the model
# trained on that treebank), exactly as printed by its documentation, "Model Performance" of
# "Universal Dependencies 2.17 Models" (models version 251125, trained on UD 2.17): github.com/
# ufal/udpipe, docs/models_ud217.md at commit 223da86f482d2242a89998599cfa614e26fb483d (also
# ufal.mff.cuni.cz/udpipe/2/models). UD 2.17 is the UDPipe 2 release nearest to this project's
# files (UD 2.16-2.18 cycles, data/ud-release/README.md); the same treebank versions are not
# guaranteed, so the column anchors, it does not compare on the same files. The table has no
# Tokens and no CLAS column; None is its "—" (hu_szeged and mr_ufal have no XPOS, mt_mudt no
# lemmas). kk_ktb has no UDPipe 2.17 model (models need 1,000 training words; it has 529), nor a
# 2.15 one: absent. UDPipe 2's models also read multilingual BERT's contextual embeddings.
UDPIPE2_COLUMNS = ("Words", "Sentences", "UPOS", "XPOS", "UFeats", "AllTags", "Lemmas", "UAS", "LAS",
                   "MLAS", "BLEX")
UDPIPE2_PUBLISHED = {  # treebank -> the row, in UDPIPE2_COLUMNS' order
    "af_afribooms": (99.91, 99.29, 98.64, 95.86, 98.23, 95.65, 98.29, 90.57, 87.56, 79.14, 79.99),
    "el_gdt": (99.87, 90.19, 98.16, 98.17, 95.76, 95.10, 96.08, 93.15, 91.38, 82.07, 82.11),
    "en_ewt": (99.07, 88.42, 96.75, 96.27, 97.21, 95.51, 97.13, 91.59, 89.91, 83.87, 84.91),
    "hu_szeged": (99.85, 95.89, 96.73, None, 94.16, 93.48, 95.11, 88.12, 84.56, 74.51, 78.03),
    "mr_ufal": (94.16, 92.63, 83.94, None, 74.45, 71.05, 84.67, 67.15, 59.85, 38.10, 46.79),
    "mt_mudt": (99.84, 86.29, 95.78, 95.79, 99.84, 95.34, None, 84.86, 80.04, 68.41, 72.50),
    "ta_ttb": (94.26, 97.52, 83.94, 82.57, 84.54, 77.97, 89.50, 70.38, 62.08, 51.33, 55.49),
}
UDPIPE2_RAW = {code: {metric: value for metric, value in zip(UDPIPE2_COLUMNS, row, strict=True)
                      if value is not None} for code, row in UDPIPE2_PUBLISHED.items()}


def read_json(folder: Path, pattern: str) -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob(pattern))]


def udpipe_results(source: Path) -> list[dict]:
    """UDPipe 1's results: ``udpipe_release.py``'s folder of jsons, or a results file this
    script wrote (its columns ``<metric> UDPipe 1``, ``UDPipe 1 raw LAS`` and ``UDPipe 1
    gold-token LAS`` read back; Tokens, Sentences and Words are in no such column), for a table
    re-made after the UDPipe 1 runs' folder is gone.

    >>> import tempfile
    >>> md = Path(tempfile.mkdtemp()) / "t.md"
    >>> _ = md.write_text("| treebank | train sentences | UPOS ours | UPOS UDPipe 1 |\\n| --- | ---: | ---: | ---: |\\n"
    ...                   "| xx_a | 10 | 90.00 | 88.50 |\\n| macro average (1) |  | 90.00 | 88.50 |\\n\\n"
    ...                   "| treebank | UDPipe 1 gold-token LAS |\\n| --- | ---: |\\n| xx_a | 61.25 |\\n")
    >>> udpipe_results(md)
    [{'code': 'xx_a', 'raw': {'UPOS': 88.5}, 'gold_tokens': {'LAS': 61.25}}]
    """
    if source.is_dir():
        return read_json(source, "*.json")
    rows: dict[str, dict] = {}
    header: list[str] = []
    for line in source.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            header = []
        elif cells[0] == "treebank":
            header = cells
        elif header and cells[0] and not cells[0].startswith(("---", "macro")):
            row = rows.setdefault(cells[0], {"code": cells[0], "raw": {}, "gold_tokens": {}})
            for name, value in zip(header, cells, strict=False):
                if not value:
                    continue
                if name == "UDPipe 1 raw LAS":
                    row["raw"]["LAS"] = float(value)
                elif name == "UDPipe 1 gold-token LAS":
                    row["gold_tokens"]["LAS"] = float(value)
                elif name.endswith(" UDPipe 1") and name[:-9] in METRICS:  # not "LAS, ours - UDPipe 1"
                    row["raw"][name[:-9]] = float(value)
    return list(rows.values())


def rescored(results: list[dict], folder: Path | None) -> list[dict]:
    """``results`` with the raw-text F1 of ``<folder>/<code>-eval/<code>-test.raw.metrics.json``
    (``parser-evaluate pipeline=... output=<folder>/<code>-eval``) where there is one: the same
    models scored again, e.g. with dictionaries added by ``retrofit_lexicon.py``."""
    if folder is None:
        return results
    out = []
    for result in results:
        code = result["treebank"]
        metrics = folder / f"{code}-eval" / f"{code}-test.raw.metrics.json"
        if metrics.is_file():
            result = {**result, "raw": json.loads(metrics.read_text(encoding="utf-8"))["f1"]}
        out.append(result)
    return out


def sweep_results(sweeps: list[Path], rescore: Path | None = None) -> list[dict]:
    return rescored([r for sweep in sweeps for r in read_json(sweep, "*/result.json")], rescore)


def against_table(sweeps: list[Path], other: list[Path], *, rescore: Path | None,
                  other_rescore: Path | None, name: str) -> str:
    """Ours - another sweep's raw-text F1 (two recipes on the same treebanks), with the parser
    stage's training minutes of each (its ``done.json`` beside the pipeline file)."""
    ours, theirs = sweep_results(sweeps, rescore), sweep_results(other, other_rescore)
    train_sentences = {r["treebank"]: r["train_sentences"] for r in ours}

    def parser_minutes(results: list[dict]) -> dict[str, float]:
        done = {r["treebank"]: Path(r["pipeline"]).parent / "parser" / "done.json" for r in results}
        return {code: json.loads(path.read_text(encoding="utf-8"))["seconds"] / 60
                for code, path in done.items() if path.is_file()}

    minutes, their_minutes = parser_minutes(ours), parser_minutes(theirs)
    lines = [(f"Differences with {name}, from raw text (F1 points); then the parser stage's "
              "training minutes of each:"), "",
             difference_table({r["treebank"]: r.get("raw") or {} for r in ours},
                              {r["treebank"]: r.get("raw") or {} for r in theirs},
                              train_sentences=train_sentences, baseline_name=name,
                              metrics=["UPOS", "Lemmas", "UFeats", "UAS", "LAS", "MLAS", "BLEX"]),
             "", f"| treebank | parser training min, ours | parser training min, {name} |",
             "| --- | ---: | ---: |"]
    lines += [f"| {code} | " + " | ".join(f"{m[code]:.1f}" if code in m else ""
                                          for m in (minutes, their_minutes)) + " |"
              for code in train_sentences]
    return "\n".join(lines)


def table(sweeps: list[Path], udpipe: Path, rescore: Path | None = None) -> str:
    ours = sweep_results(sweeps, rescore)
    baseline = {r["code"]: r for r in udpipe_results(udpipe) if "skipped" not in r}
    codes = [r["treebank"] for r in ours]
    extra = {
        "UDPipe 1 raw LAS": {c: baseline[c]["raw"]["LAS"] for c in codes if c in baseline},
        "UDPipe 1 gold-token LAS": {c: baseline[c]["gold_tokens"]["LAS"] for c in codes
                                    if c in baseline},
        "CoNLL 2018 best LAS (UD 2.2)": {c: CONLL2018_BEST_LAS[c][0] for c in codes
                                         if c in CONLL2018_BEST_LAS},
    }
    skipped = {}
    for listed in (sweep / "skipped.json" for sweep in sweeps):  # written when a sweep ends
        if listed.is_file():
            skipped.update(json.loads(listed.read_text(encoding="utf-8")))
    skipped = {code: why for code, why in skipped.items() if code not in codes}
    train_sentences = {r["treebank"]: r["train_sentences"] for r in ours}
    systems = {"ours": {r["treebank"]: r.get("raw") or {} for r in ours},
               "UDPipe 1": {c: baseline[c].get("raw") or {} for c in codes if c in baseline},
               "UDPipe 2": UDPIPE2_RAW}
    return "\n\n".join([
        release_table(ours, skipped=skipped, extra=extra),
        ("UDPipe 2: its published raw-text F1 (UD 2.17 models, github.com/ufal/udpipe "
         "docs/models_ud217.md), the same treebanks in UD 2.17, not necessarily these files; "
         "blank where it publishes none."),
        comparison_tables(systems, train_sentences=train_sentences),
        "Differences with UDPipe 1, from raw text (F1 points):",
        difference_table(systems["ours"], systems["UDPipe 1"], train_sentences=train_sentences,
                         baseline_name="UDPipe 1"),
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", type=Path, nargs="+", required=True,
                        help="parser-release's output= (one or more sweeps)")
    parser.add_argument("--udpipe", type=Path, required=True,
                        help="udpipe_release.py's --out, or a results file this script wrote")
    parser.add_argument("--rescored", type=Path, default=None,
                        help="a folder of <code>-eval/ parser-evaluate outputs replacing the "
                             "sweep's raw-text scores of those treebanks")
    parser.add_argument("--against", type=Path, nargs="+", default=None,
                        help="another recipe's sweep(s): print ours - theirs too")
    parser.add_argument("--against-rescored", type=Path, default=None,
                        help="the --rescored folder of the --against sweeps")
    parser.add_argument("--against-name", default="the other sweep")
    args = parser.parse_args(argv)
    print(table(args.sweep, args.udpipe, args.rescored))
    if args.against:
        print("\n" + against_table(args.sweep, args.against, rescore=args.rescored,
                                    other_rescore=args.against_rescored, name=args.against_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
