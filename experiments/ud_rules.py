"""What each UD rule of the decoder (parser.models.ud_rules) costs or gains, and what the UD
validator still finds: parse a treebank's test file with no rule, each rule alone and all of them,
score each parse (official CoNLL 2018 UAS/LAS) and validate it (``udvalidate --level 3``).

    python experiments/ud_rules.py --case en_ewt=<checkpoint> [--case de_gsd=<checkpoint>] \\
        --out experiments/results/ud_rules.md

Each ``--case`` is ``treebank=checkpoint`` (the checkpoint trained for that treebank); the
treebank's test file is read under $UD_ROOT (default data/ud). The language of the validator's
level-3 tests is the treebank code's prefix. ``--split dev`` parses the dev files instead.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import torch
from common import machine

from parser.data.paths import resolve_ud_root, treebank_file
from parser.eval.report import file_report
from parser.eval.validate import validate_conllu
from parser.inference import predict_file
from parser.inference.options import PredictOptions
from parser.models.ud_rules import RULES

# The validator's tests the rules are meant to remove (the classes).
CLASSES = {
    "root": ("0-is-not-root", "root-is-not-0"),
    "left_to_right": ("right-to-left-conj", "right-to-left-flat", "right-to-left-fixed",
                      "right-to-left-appos", "right-to-left-goeswith"),
    "one_subject": ("too-many-subjects",),
    "one_object": ("too-many-objects",),
    "punct": ("punct-is-nonproj", "punct-causes-nonproj", "rel-upos-punct", "upos-rel-punct"),
}


def test_ids(problems: list[str]) -> Counter:
    """Errors per validator test id (``[L3 SYNTAX too-many-subjects]`` -> ``too-many-subjects``)."""
    counts: Counter = Counter()
    for line in problems:
        tag = line.split("[", 1)[1].split("]", 1)[0].split()
        counts[tag[-1]] += 1
    return counts


def run_case(treebank: str, checkpoint: str, workdir: Path, *, split: str) -> list[dict]:
    gold = treebank_file(resolve_ud_root(), treebank, split)
    lang = treebank.split("_", 1)[0]
    settings = [("none", "none"), *((rule, rule) for rule in RULES), ("all", "all")]
    rows = []
    for name, rules in settings:
        output = workdir / f"{treebank}.{name}.conllu"
        start = time.perf_counter()
        predict_file(checkpoint, gold, output, PredictOptions(device="cpu", ud_rules=rules))
        seconds = time.perf_counter() - start
        report = file_report(gold, output)
        counts = test_ids(validate_conllu(output, level=3, lang=lang))
        scores = report["official"]
        rows.append({"rules": name, "uas": scores["UAS"], "las": scores["LAS"], "seconds": seconds,
                     "errors": sum(counts.values()), "counts": counts})
        print(f"{treebank} {name}: UAS {scores['UAS']:.2f} LAS {scores['LAS']:.2f} "
              f"errors {sum(counts.values())} ({seconds:.1f} s)", file=sys.stderr, flush=True)
    return rows


def table(treebank: str, rows: list[dict], *, split: str) -> list[str]:
    classes = [testid for ids in CLASSES.values() for testid in ids]
    lines = [f"### {treebank} {split}", "",
             "| rules | UAS | LAS | validator errors | " + " | ".join(classes) + " |",
             "|---|---:|---:|---:|" + "---:|" * len(classes)]
    for row in rows:
        lines.append(f"| {row['rules']} | {row['uas']:.2f} | {row['las']:.2f} | {row['errors']} | "
                     + " | ".join(str(row["counts"].get(testid, 0)) for testid in classes) + " |")
    other = Counter()
    for testid, count in rows[-1]["counts"].items():
        if testid not in classes:
            other[testid] = count
    lines += ["", "Errors left with all rules, other classes: "
              + (", ".join(f"{t} {c}" for t, c in other.most_common()) or "none"), ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", required=True, metavar="TREEBANK=CHECKPOINT")
    parser.add_argument("--split", default="test", choices=("test", "dev"),
                        help="the file parsed (dev: where a rule's cost is judged without test)")
    parser.add_argument("--out", type=Path, default=None, help="markdown results file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sections = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.case:
            treebank, _, checkpoint = case.partition("=")
            if not checkpoint:
                parser.error(f"--case {case!r}: expected TREEBANK=CHECKPOINT")
            sections += table(treebank, run_case(treebank, checkpoint, Path(tmp), split=args.split),
                              split=args.split)
    command = "python experiments/ud_rules.py " + " ".join(
        f"--case {case.partition('=')[0]}=<{case.partition('=')[0]} checkpoint>" for case in args.case)
    if args.split != "test":
        command += f" --split {args.split}"
    if args.out is not None:
        command += f" --out {args.out.as_posix()}"
    header = [
        "# UD rules at prediction time: cost, gain and validator errors (issue 23)", "",
        f"Command: `{command}`", "",
        f"Machine: {machine()}", "",
        f"Each row parses the treebank's {args.split} file with the checkpoint's model and the rules given",
        "(`parser-predict ... ud_rules=<rules>`; `none`: no rule, `all`: the default), scores it with",
        "the official CoNLL 2018 script and counts the errors of `udvalidate --level 3 --lang <lang>`",
        "(warnings not counted) by test id. The columns after the total are the classes the rules",
        "target (parser/models/ud_rules.py).", "",
    ]
    text = "\n".join(header + sections)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
