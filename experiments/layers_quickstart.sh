#!/usr/bin/env bash
# Issue 62: do the token-level layers (XPOS, FEATS, LEMMA heads) cost LAS at equal steps? The
# quickstart (400 steps, gold UPOS input) without them, with them at loss weight 1 (the default
# when this ran; the model group's is now 0.1), 0.3 and 0.1, and at 0.1 with the predicted XPOS and
# FEATS fed to the upper BiLSTM layer (fed01; the quickstart reads gold UPOS, so UPOS is not fed),
# seeds 1-3, one run at a time on one core; then the table of
# experiments/results/layers_quickstart.md from the runs' official test and dev scores.
#   RUNS=<a folder outside the repository> bash experiments/layers_quickstart.sh [core]   # from the repository root
set -euo pipefail
out=${RUNS:?set RUNS to a folder outside the repository}/layers_quickstart
core=${1:-0}
mkdir -p "$out"
run() {
  local name=$1 seed=$2; shift 2
  [ -f "$out/${name}_s$seed/test.pred.metrics.json" ] && return 0  # finished before
  OMP_NUM_THREADS=1 taskset -c "$core" .venv/bin/parser-train experiment=quickstart "$@" \
    trainer.seed="$seed" trainer.progress=false hydra.run.dir="$out/${name}_s$seed" \
    > "$out/${name}_s$seed.log" 2>&1
}
for seed in 1 2 3; do
  run none "$seed" 'model.layers=[]'
  run layers "$seed" 'model.layers=[xpos,feats,lemma]' model.layer_weight=1
  run w03 "$seed" 'model.layers=[xpos,feats,lemma]' '+model.layer_weights={xpos:0.3,feats:0.3,lemma:0.3}'
  run w01 "$seed" 'model.layers=[xpos,feats,lemma]' '+model.layer_weights={xpos:0.1,feats:0.1,lemma:0.1}'
  run fed01 "$seed" 'model.layers=[xpos,feats,lemma]' model.layer_weight=0.1 'model.layer_inputs=[xpos,feats]'
done
.venv/bin/python - "$out" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| arm | seeds | test UAS | test LAS | test LAS per seed | dev LAS | test UFeats | test Lemmas | test MLAS |")
print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
for arm in ("none", "layers", "w03", "w01", "fed01"):
    runs = [(json.loads((d / "test.pred.metrics.json").read_text())["official"],
             json.loads((d / "dev.pred.metrics.json").read_text())["official"])
            for d in sorted(out.glob(f"{arm}_s*")) if (d / "test.pred.metrics.json").is_file()]
    if not runs:
        continue
    def mean(split, key):
        return statistics.mean(r[split][key] for r in [{"test": t, "dev": d} for t, d in runs])
    per_seed = ", ".join(f"{t['LAS']:.2f}" for t, _ in runs)
    print(f"| {arm} | {len(runs)} | {mean('test', 'UAS'):.2f} | {mean('test', 'LAS'):.2f} | {per_seed} | "
          f"{mean('dev', 'LAS'):.2f} | {mean('test', 'UFeats'):.2f} | {mean('test', 'Lemmas'):.2f} | {mean('test', 'MLAS'):.2f} |")
PY
