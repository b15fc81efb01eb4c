#!/bin/bash
# The GPU runs of issue 16 on one CUDA device, sized for a 15-minute device lease (about 9 minutes
# with MINUTES=6):
#   smoke  a few steps on the test fixture with the fine-tuned encoder and with the BiLSTM (stops
#          the script at once if the CUDA path fails, before the long runs);
#   step   a fine-tuned MiniLM training step alone on EWT ($STEP_STEPS steps; sentences/s and
#          tokens/s: python experiments/tb_speed.py $RUNS/minilm_ft_solo);
#   train  three fine-tuned MiniLM seeds and two joint-tag BiLSTMs (the CPU recipe, and Dozat &
#          Manning's sizes) at once, $MINUTES minutes of training each, then their dev/test scores;
#   solo   fine-tuned MiniLM seeds ($SEEDS, default 1) one after another, each alone on the GPU
#          for $MINUTES minutes or $STEPS steps (not part of `all`).
# On 2026-11-27 (H200, no MPS) the 'train' stage's five processes time-sliced the GPU and its MiniLM
# runs went 5.7 times slower than alone; the stage now starts CUDA MPS where the machine has it
# (commands run as root there), which lets the processes' kernels share the GPU.
# Run from the repository root, in an environment with the package and its transformers extra
# (pip install -e '.[transformers]', torch with CUDA) and the EWT treebank (UD_ROOT or data/ud):
#   RUNS=<folder outside the repository> MODEL=.models/all-MiniLM-L6-v2 MINUTES=6 bash experiments/gpu_runs.sh [smoke|step|train|all|solo]
# Run folders (checkpoints, logs, predictions) go to $RUNS (required). DEVICE=cpu runs the same
# commands on the CPU (a check of this script, not a measurement).
set -u
STAGE=${1:-all}
MODEL=${MODEL:-.models/all-MiniLM-L6-v2}
RUNS=${RUNS:?set RUNS to a folder for the run folders, outside the repository}
MINUTES=${MINUTES:-6}
STEP_STEPS=${STEP_STEPS:-150}
DEVICE=${DEVICE:-cuda}
PY=${PY:-python}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$RUNS"

train() {  # name, overrides...
  local name=$1
  shift
  $PY -m parser.cli.train "$@" "trainer.device=$DEVICE" trainer.num_threads=3 \
    hydra.run.dir="$RUNS/$name" > "$RUNS/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc" >> "$RUNS/status.txt"
  return $rc
}

ENCODER=(model/encoder=transformer "model.encoder.name=$MODEL" model.encoder.finetune=true
         model.encoder.lstm_layers=2 model.encoder.use_chars=true)
JOINT=(model.tag_loss_weight=1 model.upos_input=predicted)
MINILM=(experiment=ewt_biaffine_cpu "${ENCODER[@]}" "${JOINT[@]}")

if [ "$STAGE" = all ] || [ "$STAGE" = smoke ]; then
  SMOKE=(data=tiny "${JOINT[@]}" trainer.max_steps=4 trainer.eval_every=2)
  train smoke_minilm "${SMOKE[@]}" "${ENCODER[@]}" || { cat "$RUNS/smoke_minilm.log"; exit 3; }
  train smoke_bilstm "${SMOKE[@]}" || { cat "$RUNS/smoke_bilstm.log"; exit 3; }
fi
if [ "$STAGE" = all ] || [ "$STAGE" = step ]; then
  train minilm_ft_solo "${MINILM[@]}" "trainer.max_steps=$STEP_STEPS" trainer.eval_every=100000 \
    trainer.final_eval=false
  $PY experiments/tb_speed.py "$RUNS/minilm_ft_solo" --skip 20
fi
if [ "$STAGE" = all ] || [ "$STAGE" = train ]; then
  MPS=""
  if [ "$DEVICE" = cuda ] && command -v nvidia-cuda-mps-control > /dev/null \
      && nvidia-cuda-mps-control -d; then
    MPS=on
    echo "CUDA MPS on" >> "$RUNS/status.txt"
  fi
  for seed in 1 2 3; do
    train "minilm_ft_s$seed" "${MINILM[@]}" "trainer.max_minutes=$MINUTES" "trainer.seed=$seed" &
  done
  train bilstm_s2 experiment=ewt_biaffine_cpu "${JOINT[@]}" "trainer.max_minutes=$MINUTES" \
    trainer.seed=2 &
  train bilstm_full_s1 experiment=ewt_biaffine "${JOINT[@]}" "trainer.max_minutes=$MINUTES" \
    trainer.eval_every=400 trainer.seed=1 &
  wait
  [ -n "$MPS" ] && echo quit | nvidia-cuda-mps-control
fi
if [ "$STAGE" = solo ]; then
  for seed in ${SEEDS:-1}; do
    train "minilm_ft_solo_s$seed" "${MINILM[@]}" "trainer.max_minutes=$MINUTES" \
      "trainer.max_steps=${STEPS:-20000}" "trainer.seed=$seed"
  done
fi
cat "$RUNS/status.txt"
