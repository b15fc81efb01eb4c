#!/bin/bash
# The GPU runs of issues 14 and 16 on one CUDA device, about 12 minutes on an H100/H200:
#   1. experiments/bench_training_path_gpu.py (the tree CRF beside torch-struct and SuPar);
#   2. a fine-tuned MiniLM training step alone (sentences/s in its TensorBoard log);
#   3. three fine-tuned MiniLM seeds and two joint-tag BiLSTMs at once, $MINUTES minutes each.
# Run from the repository root, in an environment with the package and its transformers extra
# (pip install -e '.[transformers]', torch with CUDA) and the EWT treebank (UD_ROOT or data/ud):
#   RUNS=<folder outside the repository> MODEL=.models/all-MiniLM-L6-v2 MINUTES=6 bash experiments/gpu_runs.sh [bench|train|all]
# Run folders (checkpoints, logs, predictions) go to $RUNS (required); the benchmark's results file to $RUNS too.
set -u
STAGE=${1:-all}
MODEL=${MODEL:-.models/all-MiniLM-L6-v2}
RUNS=${RUNS:?set RUNS to a folder for the run folders, outside the repository}
MINUTES=${MINUTES:-6}
PY=${PY:-python}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$RUNS"

train() {  # name, overrides...
  local name=$1
  shift
  $PY -m parser.cli.train "$@" trainer.device=cuda trainer.num_threads=3 hydra.run.dir="$RUNS/$name" \
    > "$RUNS/$name.log" 2>&1
  echo "$name rc=$?" >> "$RUNS/status.txt"
}

MINILM=(experiment=ewt_biaffine_cpu model/encoder=transformer "model.encoder.name=$MODEL"
        model.encoder.finetune=true model.encoder.lstm_layers=2 model.encoder.use_chars=true
        model.tag_loss_weight=1 model.upos_input=predicted)

if [ "$STAGE" != train ]; then
  timeout 200 $PY experiments/bench_training_path_gpu.py --repeats 3 --out "$RUNS" > "$RUNS/bench.log" 2>&1
  echo "bench rc=$?" >> "$RUNS/status.txt"
  train minilm_ft_solo "${MINILM[@]}" trainer.max_steps=200 trainer.eval_every=100000
fi
if [ "$STAGE" != bench ]; then
  for seed in 1 2 3; do
    train "minilm_ft_s$seed" "${MINILM[@]}" "trainer.max_minutes=$MINUTES" "trainer.seed=$seed" &
  done
  train bilstm_s2 experiment=ewt_biaffine_cpu model.tag_loss_weight=1 model.upos_input=predicted \
    "trainer.max_minutes=$MINUTES" trainer.seed=2 &
  train bilstm_full_s1 experiment=ewt_biaffine model.tag_loss_weight=1 model.upos_input=predicted \
    "trainer.max_minutes=$MINUTES" trainer.eval_every=400 trainer.seed=1 &
  wait
fi
cat "$RUNS/status.txt"
