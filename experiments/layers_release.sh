#!/usr/bin/env bash
# Issue 62: do the token-level layers (XPOS, FEATS, LEMMA heads) cost LAS at equal steps on the
# release treebanks? The default recipe's parser stage (configs/recipe/release_cpu.yaml, its seed
# and steps) trained again without them, beside a parser-release sweep's own parser stage (the
# layers at the model group's loss weight), each scored from gold tokens: test paired by sentence
# (parser-evaluate compare=, bootstrap) and dev (what chose each checkpoint); then the table. A
# rerun skips finished runs: the runs can go before the sweep has finished, the table after.
#   RUNS=<a folder outside the repository> bash experiments/layers_release.sh SWEEP CORE CODE...
# (from the repository root; SWEEP: the sweep's output=, e.g. $RUNS/release62; the treebanks'
# root: $UD_RELEASE, default data/ud-release)
set -euo pipefail
sweep=$1 core=$2
shift 2
out=${RUNS:?set RUNS to a folder outside the repository}/layers_release
root=${UD_RELEASE:-data/ud-release}
mkdir -p "$out"
mapfile -t recipe < <(.venv/bin/python -c "from parser.cli.train_pipeline import load_recipe
print('\n'.join(load_recipe('release_cpu')['parser']))")
for code in "$@"; do  # the runs first (they need nothing of the sweep), then the comparisons
  run=$out/${code}_none
  if [ ! -f "$run/test.pred.metrics.json" ]; then
    OMP_NUM_THREADS=1 taskset -c "$core" .venv/bin/parser-train "data.treebank=$code" \
      "data.root=$root" "${recipe[@]}" 'model.layers=[]' trainer.progress=false \
      "hydra.run.dir=$run" > "$run.log" 2>&1
  fi
done
for code in "$@"; do
  run=$out/${code}_none
  gold=$(ls "$root"/UD_*/"$code-ud-test.conllu")
  .venv/bin/parser-evaluate "gold=$gold" "pred=$sweep/$code/parser/test.pred.conllu" \
    "compare=$run/test.pred.conllu" "metrics=$out/${code}_compare.json" > /dev/null
done
.venv/bin/python - "$sweep" "$out" "$@" <<'PY'
import json, sys
from pathlib import Path
sweep, out, codes = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
def las(path):  # blank for a treebank without a dev file
    return f"{json.loads(path.read_text())['official']['LAS']:.2f}" if path.is_file() else ""
print("| treebank | test LAS, layers | test LAS, none | layers - none [95% CI] | p (one-sided, the better arm) | dev LAS, layers | dev LAS, none |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for code in codes:
    c = json.loads((out / f"{code}_compare.json").read_text())["LAS"]
    print(f"| {code} | {c['a']:.2f} | {c['b']:.2f} | {c['delta']:+.2f} [{c['ci'][0]:+.2f}, {c['ci'][1]:+.2f}] | "
          f"{c['p_value']:.3f} | {las(sweep / code / 'parser' / 'dev.pred.metrics.json')} | "
          f"{las(out / f'{code}_none' / 'dev.pred.metrics.json')} |")
PY
