#!/usr/bin/env bash
# Issue 62: the parser's own predicted UPOS, XPOS and FEATS fed back to it (model.layer_inputs,
# UDPipe 2's design), chosen on dev. The default recipe's parser stage (configs/recipe/release_cpu.yaml,
# its seed and steps) from gold tokens in three arms: `lean`, the recipe as it is (one BiLSTM
# layer); `two`, with two layers (feeding needs a layer below the one fed); `fed`, two layers
# with the tags fed (a treebank without an XPOS column feeds UPOS and FEATS: one recipe for every
# treebank). Each run's dev and test files scored with every official metric; `fed` against each
# other arm paired by sentence (parser-evaluate compare=, bootstrap) on dev, which chooses, and
# on test. A rerun skips finished runs, so the arms can go on two cores:
#   RUNS=<a folder outside the repository> bash experiments/tags_fed.sh CORE CODE ARM...
#   RUNS=... bash experiments/tags_fed.sh table CODE...       # the table, once every arm is done
# (from the repository root; the treebanks' root: $UD_RELEASE, default data/ud-release)
set -euo pipefail
out=${RUNS:?set RUNS to a folder outside the repository}/tags_fed
root=${UD_RELEASE:-data/ud-release}
mkdir -p "$out"
arm_overrides() {
  case $1 in
    lean) ;;
    two) echo model.lstm_layers=2 ;;
    fed) printf '%s\n' model.lstm_layers=2 'model.layer_inputs=[upos,xpos,feats]' ;;
    *) echo "unknown arm $1 (lean, two, fed)" >&2; exit 2 ;;
  esac
}
if [ "$1" != table ]; then
  core=$1 code=$2
  shift 2
  mapfile -t recipe < <(.venv/bin/python -c "from parser.cli.train_pipeline import load_recipe
print('\n'.join(load_recipe('release_cpu')['parser']))")
  for arm in "$@"; do
    mapfile -t extra < <(arm_overrides "$arm")
    run=$out/${code}_$arm
    [ -f "$run/test.pred.metrics.json" ] && continue  # finished before
    start=$SECONDS
    OMP_NUM_THREADS=1 taskset -c "$core" .venv/bin/parser-train "data.treebank=$code" \
      "data.root=$root" "${recipe[@]}" "${extra[@]}" trainer.progress=false \
      "hydra.run.dir=$run" > "$run.log" 2>&1
    echo $((SECONDS - start)) > "$run/seconds.txt"  # training and the final dev and test parses
  done
  exit 0
fi
shift
for code in "$@"; do
  for split in dev test; do
    gold=$(ls "$root"/UD_*/"$code-ud-$split.conllu")
    for other in lean two; do
      .venv/bin/parser-evaluate "gold=$gold" "pred=$out/${code}_fed/$split.pred.conllu" \
        "compare=$out/${code}_$other/$split.pred.conllu" \
        "metrics=$out/${code}_fed_vs_${other}_$split.json" > /dev/null
    done
  done
done
.venv/bin/python - "$out" "$@" <<'PY'
import json, sys
from pathlib import Path
out, codes = Path(sys.argv[1]), sys.argv[2:]
keys = ("UAS", "LAS", "UPOS", "UFeats", "MLAS", "BLEX")
print("| treebank | arm | " + " | ".join(f"dev {k}" for k in keys) + " | test LAS | test MLAS | seconds |")
print("| --- | --- | " + " | ".join("---:" for _ in keys) + " | ---: | ---: | ---: |")
for code in codes:
    for arm in ("lean", "two", "fed"):
        run = out / f"{code}_{arm}"
        dev, test = (json.loads((run / f"{s}.pred.metrics.json").read_text())["official"]
                     for s in ("dev", "test"))
        seconds = run / "seconds.txt"
        seconds = seconds.read_text().strip() if seconds.is_file() else ""
        print(f"| {code} | {arm} | " + " | ".join(f"{dev[k]:.2f}" for k in keys)
              + f" | {test['LAS']:.2f} | {test['MLAS']:.2f} | {seconds} |")
print()
print("| treebank | fed against | dev LAS difference [95% CI] | p (one-sided) | test LAS difference [95% CI] | p |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for code in codes:
    for other in ("lean", "two"):
        cells = []
        for split in ("dev", "test"):
            c = json.loads((out / f"{code}_fed_vs_{other}_{split}.json").read_text())["LAS"]
            cells += [f"{c['delta']:+.2f} [{c['ci'][0]:+.2f}, {c['ci'][1]:+.2f}]", f"{c['p_value']:.3f}"]
        print(f"| {code} | {other} | " + " | ".join(cells) + " |")
PY
