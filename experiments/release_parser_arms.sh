#!/usr/bin/env bash
# Issue 62: variants of the default recipe's parser (configs/recipe/release_cpu.yaml's parser
# stage, its seed and steps), each trained from gold tokens and chosen on dev:
#   lean      the recipe as it is (one BiLSTM layer)
#   two       two BiLSTM layers (feeding tags needs a layer below the one fed)
#   fed       two layers, the parser's own predicted UPOS, XPOS and FEATS fed back to the upper
#             one (model.layer_inputs, UDPipe 2's design; a treebank without an XPOS column
#             feeds UPOS and FEATS: one recipe for every treebank)
#   factored  the recipe with FEATS scored as the sum of its features (feats_factored)
# Each run's dev and test files scored with every official metric, and the pairs fed-lean,
# fed-two, factored-lean compared sentence by sentence (parser-evaluate compare=, bootstrap) on
# dev, which chooses, and on test. A rerun skips finished runs, so the arms can go on two cores:
#   RUNS=<a folder outside the repository> bash experiments/release_parser_arms.sh CORE CODE ARM...
#   RUNS=... bash experiments/release_parser_arms.sh table CODE...   # the tables, from the finished arms
# (from the repository root; the treebanks' root: $UD_RELEASE, default data/ud-release)
set -euo pipefail
out=${RUNS:?set RUNS to a folder outside the repository}/release_parser_arms
root=${UD_RELEASE:-data/ud-release}
mkdir -p "$out"
arm_overrides() {
  case $1 in
    lean) ;;
    two) echo model.lstm_layers=2 ;;
    fed) printf '%s\n' model.lstm_layers=2 'model.layer_inputs=[upos,xpos,feats]' ;;
    factored) echo 'model.layers=[xpos,feats_factored,lemma]' ;;
    *) echo "unknown arm $1 (lean, two, fed, factored)" >&2; exit 2 ;;
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
pairs="fed:lean fed:two factored:lean"
for code in "$@"; do
  for pair in $pairs; do
    a=${pair%:*} b=${pair#*:}
    [ -f "$out/${code}_$a/test.pred.conllu" ] && [ -f "$out/${code}_$b/test.pred.conllu" ] || continue
    for split in dev test; do
      .venv/bin/parser-evaluate "gold=$(ls "$root"/UD_*/"$code-ud-$split.conllu")" \
        "pred=$out/${code}_$a/$split.pred.conllu" "compare=$out/${code}_$b/$split.pred.conllu" \
        "metrics=$out/${code}_${a}_vs_${b}_$split.json" > /dev/null
    done
  done
done
.venv/bin/python - "$out" "$pairs" "$@" <<'PY'
import json, sys
from pathlib import Path
out, pairs, codes = Path(sys.argv[1]), [p.split(":") for p in sys.argv[2].split()], sys.argv[3:]
keys = ("UAS", "LAS", "UPOS", "UFeats", "AllTags", "Lemmas", "MLAS", "BLEX")
print("| treebank | arm | " + " | ".join(f"dev {k}" for k in keys) + " | test LAS | test UFeats | test MLAS | seconds |")
print("| --- | --- | " + " | ".join("---:" for _ in keys) + " | ---: | ---: | ---: | ---: |")
for code in codes:
    for arm in ("lean", "two", "fed", "factored"):
        run = out / f"{code}_{arm}"
        if not (run / "test.pred.metrics.json").is_file():
            continue
        dev, test = (json.loads((run / f"{s}.pred.metrics.json").read_text())["official"]
                     for s in ("dev", "test"))
        seconds = run / "seconds.txt"
        seconds = seconds.read_text().strip() if seconds.is_file() else ""
        print(f"| {code} | {arm} | " + " | ".join(f"{dev[k]:.2f}" for k in keys)
              + f" | {test['LAS']:.2f} | {test['UFeats']:.2f} | {test['MLAS']:.2f} | {seconds} |")
print()
print("| treebank | arms | dev LAS difference [95% CI] | p (one-sided) | test LAS difference [95% CI] | p |")
print("| --- | --- | ---: | ---: | ---: | ---: |")
for code in codes:
    for a, b in pairs:
        files = [out / f"{code}_{a}_vs_{b}_{split}.json" for split in ("dev", "test")]
        if not all(f.is_file() for f in files):
            continue
        cells = []
        for f in files:
            c = json.loads(f.read_text())["LAS"]
            cells += [f"{c['delta']:+.2f} [{c['ci'][0]:+.2f}, {c['ci'][1]:+.2f}]", f"{c['p_value']:.3f}"]
        print(f"| {code} | {a} - {b} | " + " | ".join(cells) + " |")
PY
