"""What the token-level layers (LEMMA, XPOS, FEATS heads) cost: training seconds per step and
``parser-predict`` words/s, the code from before the layers against today's with and without
them, measured in one run (issue 45: at most 15% of either).

Arms, each in a fresh process with one thread, the code taken from ``--old`` (a checkout of the
commit before the layers) or this repository:

- ``old``: the code before layers, ``experiment=release_cpu`` (what the release recipe trains);
- ``new, layers=[]``: today's code with ``model.layers=[]``;
- ``new, layers``: today's code with the model group's layers (xpos, feats, lemma).

Training: ``--steps`` steps of ``Trainer.fit`` on the treebank's training file (one dev
evaluation at the last step, which decodes the layers too), timed inside the process. Prediction:
``python -m parser.cli.predict`` of each arm's checkpoint on the test file, timed from process
start to exit (load, read, parse, write). ``--repeats`` rounds over all arms, interleaved, so that
a change of the machine's load hits every arm alike; medians reported.

    git worktree add ../old45 a357911
    PYTHONPATH=. python experiments/bench_layers_cost.py --old ../old45 --root data/ud \\
        --treebank en_ewt --out experiments/results/layers_cost.md
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TRAIN = """
import json, sys, time, torch
from hydra import compose, initialize_config_dir
import parser
from parser.config import config_dir, register_configs
from parser.train.loop import Trainer
torch.set_num_threads(1)
register_configs()
with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
    cfg = compose("config", overrides=sys.argv[2:])
started = time.perf_counter()
Trainer(cfg, run_dir=sys.argv[1]).fit()
print(json.dumps({"seconds": time.perf_counter() - started, "code": parser.__file__}))
"""


def arms(old: Path) -> list[tuple[str, Path, list[str]]]:
    return [("old (before layers)", old, []),
            ("new, model.layers=[]", REPO, ["model.layers=[]"]),
            ("new, model.layers=[xpos,feats,lemma]", REPO, [])]


def run(code: Path, args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(code.resolve()), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], cwd=code, env=env, capture_output=True,
                          text=True, check=True)


def words(path: Path) -> int:
    with open(path, encoding="utf-8") as lines:
        return sum(1 for line in lines if line[:1].isdigit() and line.split("\t", 1)[0].isdigit())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, required=True, help="a checkout of the code before layers")
    parser.add_argument("--root", type=Path, default=Path("data/ud"))
    parser.add_argument("--treebank", default="en_ewt")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    test = next(root.glob(f"**/{args.treebank}-ud-test.conllu"))
    n_words = words(test)
    overrides = ["experiment=release_cpu", f"data.root={root}", f"data.treebank={args.treebank}",
                 f"trainer.max_steps={args.steps}", f"trainer.eval_every={args.steps}",
                 "trainer.progress=false", "logger.tensorboard=false"]
    train_s: dict[str, list[float]] = {}
    predict_s: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as work:
        for round_ in range(args.repeats):
            for name, code, extra in arms(args.old):
                run_dir = Path(work) / f"{len(train_s.get(name, []))}-{name.split(',')[0][:3]}{len(extra)}"
                result = run(code, ["-c", TRAIN, str(run_dir), *overrides, *extra])
                measured = json.loads(result.stdout.strip().splitlines()[-1])
                if not measured["code"].startswith(str(code.resolve())):
                    raise SystemExit(f"{name}: ran {measured['code']}, not the code of {code}")
                train_s.setdefault(name, []).append(measured["seconds"] / args.steps)
                started = time.perf_counter()
                run(code, ["-m", "parser.cli.predict", f"checkpoint={run_dir}/checkpoints/best.pt",
                           f"input={test}", f"output={run_dir}/test.pred.conllu"])
                predict_s.setdefault(name, []).append(time.perf_counter() - started)
                print(name, round_, train_s[name][-1], predict_s[name][-1], flush=True)
    base = statistics.median(train_s[arms(args.old)[0][0]])
    base_words = n_words / statistics.median(predict_s[arms(args.old)[0][0]])
    rows = ["| arm | training s/step | vs old | parser-predict words/s (whole process) | vs old |",
            "| --- | ---: | ---: | ---: | ---: |"]
    for name, _, _ in arms(args.old):
        step = statistics.median(train_s[name])
        rate = n_words / statistics.median(predict_s[name])
        rows.append(f"| {name} | {step:.3f} | {step / base:.2f}x | {rate:,.0f} | {rate / base_words:.2f}x |")
    table = "\n".join(rows)
    print(table)
    if args.out:
        args.out.write_text(
            f"<!-- {platform.processor() or platform.machine()}, {args.treebank}, {args.steps} steps, "
            f"{args.repeats} rounds, test {n_words} words; raw: {json.dumps({'train': train_s, 'predict': predict_s})} -->\n"
            + table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
