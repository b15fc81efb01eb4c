"""Issue 38's accuracy protocol: likelihood, plain self-training and self-training on confident
arcs, ``--seeds`` each, on every treebank given, then one table per treebank with paired
significance against plain self-training (``experiments/compare_arms.py``).

    PYTHONPATH=. python experiments/ssl_protocol.py --root data/ud-release --out $RUNS/ssl38 \\
        --treebanks en_ewt af_afribooms el_gdt hu_szeged mt_mudt --seeds 1 2 3

Per treebank and seed (``experiment=ssl_ewt``: ``data.labeled_size`` labeled trees, the rest of
the training file as unlabeled text, gold UPOS input):

- ``likelihood``: the labeled trees alone; its ``best.pt`` is the teacher of the two others
  (the same seed's);
- ``self_training``: ``objective=kl_fair`` with ``tree=mst``: the student fits the teacher's
  whole 1-best tree on each unlabeled sentence (what Stanza and DCST do), at the weight and
  warm-up issue 19's protocol chose for self-training on EWT dev (ssl_fair.md);
- ``confident_arcs``: ``objective=confident_arcs``: only the teacher's arcs whose exact marginal
  passes the threshold, the student's marginal likelihood of every tree containing them.

``--curve N ...``: the learning curve in unlabeled text of ``--curve-arm`` (first seed only),
one run per size with ``data.unlabeled_size=N`` (a nested subset of the training file's unlabeled
text; the vocabulary and the teacher are the full run's), in ``<arm>_s<seed>_u<N>``, and a table
``<treebank>_curve.md`` of every size against likelihood (no unlabeled text), the full-text run last.

Each run is a ``parser-train`` subprocess in ``<out>/<treebank>/<arm>_s<seed>``; a run whose
``test.pred.conllu`` exists is not run again and a killed one resumes from its last checkpoint
(``trainer.resume=last``), so the command goes on after a kill. ``--extra`` overrides go to every
run (for a smoke test: ``--extra trainer.max_steps=4 trainer.eval_every=2``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments"))

import compare_arms

from parser.data.treebanks import read_treebank_info

ARMS = {
    "likelihood": ["objective=likelihood"],
    "self_training": ["objective=kl_fair", "+objective.terms.kl.tree=mst"],
    "confident_arcs": ["objective=confident_arcs"],
}
TEACHER_OPTION = {"self_training": "objective.terms.kl.checkpoint",
                  "confident_arcs": "objective.terms.confident_arcs.checkpoint"}


def train(folder: Path, overrides: list[str]) -> Path:
    """``folder``'s finished run, trained now unless it finished before."""
    if (folder / "test.pred.conllu").is_file():
        return folder
    if list((folder / "checkpoints").glob("step-*.pt")):
        overrides = [*overrides, "trainer.resume=last"]  # a killed run goes on from its checkpoint
    command = [sys.executable, "-m", "parser.cli.train", *overrides, f"hydra.run.dir={folder}"]
    print("$", " ".join(command[2:]), flush=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    log_path = folder.parent / f"{folder.name}.log"
    with open(log_path, "a", encoding="utf-8") as log:
        done = subprocess.run(command, check=False, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"{folder.name}: parser-train failed with exit status {done.returncode}; "
                         f"its log: {log_path} (run the command again to resume)")
    return folder


def common_overrides(code: str, *, root: Path, seed: int, extra: list[str]) -> list[str]:
    return ["experiment=ssl_ewt", f"data.root={root}", f"data.treebank={code}", f"trainer.seed={seed}",
            "trainer.num_threads=1", *extra]


def student(arm: str, teacher: Path) -> list[str]:
    """The overrides of a self-training ``arm`` taught by the finished run ``teacher``."""
    return [*ARMS[arm], f"{TEACHER_OPTION[arm]}={teacher / 'checkpoints' / 'best.pt'}"]


def treebank_runs(code: str, *, root: Path, out: Path, seeds: list[int],
                  extra: list[str]) -> dict[str, list[Path]]:
    """Every arm's finished runs of ``code``, in seed order."""
    runs: dict[str, list[Path]] = {arm: [] for arm in ARMS}
    for seed in seeds:
        common = common_overrides(code, root=root, seed=seed, extra=extra)
        teacher = train(out / code / f"likelihood_s{seed}", [*common, *ARMS["likelihood"]])
        runs["likelihood"].append(teacher)
        for arm in ("self_training", "confident_arcs"):
            runs[arm].append(train(out / code / f"{arm}_s{seed}", [*common, *student(arm, teacher)]))
    return runs


def curve_runs(code: str, arm: str, sizes: list[int], *, root: Path, out: Path, seed: int,
               extra: list[str]) -> list[tuple[str, Path]]:
    """``arm``'s finished runs with ``data.unlabeled_size`` of each of ``sizes``, as (size, run)."""
    common = common_overrides(code, root=root, seed=seed, extra=extra)
    teacher = out / code / f"likelihood_s{seed}"
    return [(f"{size:,}", train(out / code / f"{arm}_s{seed}_u{size}",
                                [*common, *student(arm, teacher), f"data.unlabeled_size={size}"]))
            for size in sizes]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the UD data root (either layout)")
    parser.add_argument("--out", type=Path, required=True, help="run folders and tables go here")
    parser.add_argument("--treebanks", nargs="+", required=True)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--extra", nargs="*", default=[], help="overrides for every run")
    parser.add_argument("--curve", nargs="*", type=int, default=[], metavar="N",
                        help="unlabeled sizes of the learning curve (first seed)")
    parser.add_argument("--curve-arm", choices=sorted(TEACHER_OPTION), default="confident_arcs")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    for name in args.treebanks:
        info = read_treebank_info(root, name)
        runs = treebank_runs(info.code, root=root, out=args.out.resolve(), seeds=args.seeds,
                             extra=args.extra)
        table = args.out / f"{info.code}.md"
        compare_arms.main(["--gold", str(info.files["test"]), "--out", str(table),
                           "--baseline", "self_training=" + ",".join(map(str, runs["self_training"])),
                           "--arm", "likelihood=" + ",".join(map(str, runs["likelihood"])),
                           "--arm", "confident_arcs=" + ",".join(map(str, runs["confident_arcs"]))])
        if args.curve:
            seed = args.seeds[0]
            points = curve_runs(info.code, args.curve_arm, args.curve, root=root, out=args.out.resolve(),
                                seed=seed, extra=args.extra)
            full = (f"all ({args.curve_arm})", runs[args.curve_arm][0])
            compare_arms.main(["--gold", str(info.files["test"]), "--out", str(args.out / f"{info.code}_curve.md"),
                               "--baseline", f"likelihood={runs['likelihood'][0]}",
                               *[f"--arm={name}={run}" for name, run in [*points, full]]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
