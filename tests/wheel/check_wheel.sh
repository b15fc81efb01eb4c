#!/usr/bin/env bash
# The package as a pip user gets it (issue 60): build the wheel (and the sdist, whose wheel must
# hold the same files), install it into a fresh venv outside the source tree, and from a folder of
# its own run what a user runs first: parser-train (two steps on EWT), parser-predict,
# parser-evaluate (the official scorer), parser-select, parser-serve (one request); then all of it again with no C compiler on
# PATH and an empty native-library cache (the pure-torch decoders, which must give the compiled
# ones' trees), and --version once.
#
#   bash tests/wheel/check_wheel.sh        (make wheel-check; make test runs it after pytest)
#
# Environment: PYTHON (default: the checkout's .venv/bin/python, which needs `build`: the dev
# extra), WHEEL_CHECK_UD (the UD root holding en_ewt/; default ../shared/data/ud, else $UD_ROOT),
# KEEP=1 keeps the temporary folder. A failing step stops the script, names the step, shows the
# end of its log and keeps the folder.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
START=$SECONDS
WORK=
STEP=setup

die() {
    echo "wheel check FAILED at step '$STEP': $*" >&2
    [ -z "${SERVE_PID:-}" ] || kill -KILL "$SERVE_PID" 2>/dev/null || true
    [ -z "$WORK" ] || echo "  (logs and files kept in $WORK)" >&2
    trap - EXIT
    exit 1
}

on_exit() {
    local status=$?
    [ -z "${SERVE_PID:-}" ] || kill -KILL "$SERVE_PID" 2>/dev/null || true
    if [ "$status" -ne 0 ]; then
        echo "wheel check FAILED at step '$STEP' (exit status $status); files kept in $WORK" >&2
    elif [ "${KEEP:-0}" = 1 ]; then
        echo "files kept in $WORK"
    else
        # in the background: deleting the venv's torch (about 1 GB) took 90 s on this project's
        # disk (mounted with online discard), more than any step
        echo "removing $WORK in the background"
        nohup nice rm -rf "$WORK" >/dev/null 2>&1 &
    fi
}

# step NAME COMMAND...: runs COMMAND with its output in $LOGS/NAME.log; on failure shows its end.
step() {
    STEP=$1
    shift
    local log="$LOGS/$STEP.log" began=$SECONDS
    if ! "$@" >"$log" 2>&1; then
        echo "---- last lines of $log ----" >&2
        tail -n 40 "$log" >&2
        die "command failed: $*"
    fi
    printf '[%4ds] ok  %s (%ds)\n' "$((SECONDS - START))" "$STEP" "$((SECONDS - began))"
}

# The data: EWT's training file (the run reads its first sentences) and a few dev sentences for
# the dev/test scores, prediction, evaluation and selection.
UD=${WHEEL_CHECK_UD:-$REPO/../shared/data/ud}
[ -f "$UD/en_ewt/en_ewt-ud-train.conllu" ] || UD=${UD_ROOT:-}
[ -n "$UD" ] && [ -f "$UD/en_ewt/en_ewt-ud-train.conllu" ] \
    || die "no en_ewt under ../shared/data/ud, \$WHEEL_CHECK_UD or \$UD_ROOT"
UD=$(cd "$UD" && pwd)
[ -x "$PYTHON" ] || die "no python at $PYTHON (run make install, or set PYTHON)"
"$PYTHON" -c "import build" 2>/dev/null || die "$PYTHON lacks the 'build' package (the dev extra)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/parser-wheel-check.XXXXXX")
trap on_exit EXIT
LOGS=$WORK/logs
mkdir -p "$LOGS"
FEW=$WORK/few.conllu
awk -v RS= -v ORS='\n\n' 'NR <= 12' "$UD/en_ewt/en_ewt-ud-dev.conllu" >"$FEW"

# ---- the wheel and the sdist ----------------------------------------------------------------
step build-wheel "$PYTHON" -m build --wheel --outdir "$WORK/dist" "$REPO"
WHEELS=("$WORK"/dist/*.whl)
WHEEL=${WHEELS[0]}
step build-sdist-then-wheel "$PYTHON" -m build --outdir "$WORK/from-sdist" "$REPO"

# what the commands read at run time, in the wheel; the sdist's wheel holds the same bytes
same_wheels() {
    "$PYTHON" - "$WHEEL" "$WORK"/from-sdist/*.whl <<'EOF'
import sys, zipfile
direct, from_sdist = (zipfile.ZipFile(path) for path in sys.argv[1:3])
names = set(direct.namelist())
needed = ["parser/configs/config.yaml", "parser/configs/experiment/fast_cpu.yaml",
          "parser/configs/tagger/tagger.yaml", "parser/configs/tokenizer/tokenizer.yaml",
          "parser/constraints/sets/ud_universal.yaml", "parser/structs/decoding/mst_native.c",
          "parser/structs/decoding/eisner_native.c", "parser/structs/decoding/punct_native.c",
          "parser/structs/decoding/viterbi_native.c"]
missing = [name for name in needed if name not in names]
assert not missing, f"the wheel lacks {missing}"
other = set(from_sdist.namelist())
assert names == other, (f"only in the direct wheel: {sorted(names - other)} (files left in the "
                        f"checkout's build/ by an older build? rm -rf build); only in the sdist's: "
                        f"{sorted(other - names)}")
differ = [n for n in sorted(names) if direct.read(n) != from_sdist.read(n)]
assert not differ, f"different bytes: {differ}"
print(f"{len(names)} files, the same in both wheels")
EOF
}
step wheel-contents same_wheels

# ---- a fresh venv outside the source tree: torch's CPU wheel, then the wheel and its dependencies
VENV=$WORK/venv
step venv "$PYTHON" -m venv "$VENV"
step install-torch "$VENV/bin/python" -m pip install -q torch==2.13.0
step install-wheel "$VENV/bin/python" -m pip install -q "$WHEEL[serve]"

# The commands run with a clean environment (no PYTHONPATH, UD_ROOT, PARSER_CONFIG_DIR, ... of the
# caller), a home and cache of their own, and from a folder outside the source tree.
run_clean() {  # run_clean PATH COMMAND...
    local path=$1
    shift
    (cd "$CWD" && env -i PATH="$path" HOME="$HOME_DIR" XDG_CACHE_HOME="$HOME_DIR/.cache" \
        TMPDIR="$HOME_DIR/tmp" LANG=C.UTF-8 OMP_NUM_THREADS=1 "$@")
}

where_imported() {
    local file
    file=$(run_clean "$1" python -c 'import parser; print(parser.__file__)')
    echo "parser imported from $file"
    case "$file" in
        "$VENV"/*) ;;
        *) echo "not inside the venv $VENV" >&2; return 1 ;;
    esac
}

version() {  # parser-train --version: the launcher answers before Hydra
    local out expected
    expected="parser $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("parser"))')"
    out=$(run_clean "$1" parser-train --version)
    [ "$out" = "$expected" ] || { echo "parser-train --version: '$out', not '$expected'" >&2; return 1; }
    echo "parser-train --version: $out"
}

# A small model, two steps on EWT's first 200 training sentences, dev/test scores on the few.
TRAIN_OPTIONS=(
    "data.root=$UD" data.treebank=en_ewt data.max_train_sentences=200
    "data.dev_file=$FEW" "data.test_file=$FEW"
    trainer.max_steps=2 trainer.eval_every=2 trainer.progress=false trainer.num_threads=1
    model.word_dim=16 model.char_dim=8 model.char_hidden=16 model.upos_dim=8 model.lstm_hidden=16
    model.arc_mlp=16 model.rel_mlp=8
)

commands() {  # commands LABEL PATH: train, predict, evaluate, select under PATH
    local label=$1 path=$2 run="$WORK/$1/run"
    local out="$WORK/$1" checkpoint="$WORK/$1/run/checkpoints/best.pt"
    step "$label-train" run_clean "$path" parser-train "${TRAIN_OPTIONS[@]}" "hydra.run.dir=$run"
    [ -f "$checkpoint" ] || die "no checkpoint at $checkpoint"
    step "$label-predict" run_clean "$path" parser-predict "checkpoint=$checkpoint" "input=$FEW" \
        "output=$out/pred.conllu"
    [ -s "$out/pred.conllu" ] || die "parser-predict wrote nothing"
    step "$label-evaluate" run_clean "$path" parser-evaluate "gold=$FEW" "pred=$out/pred.conllu"
    grep -q "LAS" "$LOGS/$label-evaluate.log" || die "no LAS in parser-evaluate's report"
    step "$label-select" run_clean "$path" parser-select "checkpoint=$checkpoint" "pool=$FEW" \
        "output=$out/batch.conllu" strategy=words budget=20 cap=3
    [ -s "$out/batch.conllu" ] || die "parser-select wrote nothing"
    serve_smoke "$label" "$path"
}

# ---- parser-serve: started from the installed package on a free loopback port with a pipeline
# file (the test fixture: a tiny tokenizer + parser), the page and its static files fetched, one
# sentence parsed through UDPipe's /process, then stopped with SIGTERM (it must exit by itself).
# Called once per pass, so it also runs on the torch decoders.
PIPELINE=$REPO/tests/fixtures/pre_layers/tiny.pipeline

serve_request() {  # serve_request PATH PORT: /models, the page, /process; each answer checked
    run_clean "$1" python - "$2" <<'PY'
import json, sys, time, urllib.parse, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(240):  # the models load first: up to 60 s
    try:
        models = json.load(urllib.request.urlopen(f"{base}/models", timeout=5))
        break
    except OSError:
        time.sleep(0.25)
else:
    raise SystemExit("parser-serve did not answer /models within 60 s")
assert models["default_model"] == "tiny", models
page = urllib.request.urlopen(f"{base}/", timeout=5).read().decode()
assert "<html" in page.lower(), page[:200]
body = urllib.parse.urlencode({"data": "The dog barks .", "tokenizer": "", "tagger": "",
                               "parser": ""}).encode()
answer = json.load(urllib.request.urlopen(f"{base}/process", data=body, timeout=30))
words = [line for line in answer["result"].splitlines() if line[:1].isdigit()]
assert answer["model"] == "tiny" and len(words) >= 3, answer
print("parser-serve answered /models, / and /process:", len(words), "words")
PY
}

serve_smoke() {  # serve_smoke LABEL PATH
    local label=$1 path=$2 port
    port=$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    STEP="$label-serve"
    run_clean "$path" parser-serve "models=$PIPELINE" "port=$port" >"$LOGS/$label-serve.log" 2>&1 &
    SERVE_PID=$!
    step "$label-serve-request" serve_request "$path" "$port"
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$SERVE_PID" 2>/dev/null &&
        die "parser-serve did not stop within 10 s of SIGTERM (log: $LOGS/$label-serve.log)"
    SERVE_PID=
}

# ---- 1. with the machine's PATH (C compiler there): the decoders are compiled from the wheel's
# C sources into the empty cache of a fresh home
CWD=$WORK/cwd
HOME_DIR=$WORK/home-compiler
mkdir -p "$CWD" "$HOME_DIR/tmp"
WITH_CC="$VENV/bin:$PATH"
step imported-from-venv where_imported "$WITH_CC"
step version version "$WITH_CC"
# the tagger's and tokenizer's trees, which take optim/ (and trainer/, logger/) from the parser's
step tagger-config run_clean "$WITH_CC" parser-train-tagger optim=adam --cfg job
step tokenizer-config run_clean "$WITH_CC" parser-train-tokenizer optim=adam --cfg job
commands with-compiler "$WITH_CC"
compiled() {
    ls "$HOME_DIR"/.cache/parser/native/decoders_native-*.so
}
HAVE_CC=$(command -v gcc || command -v cc || true)
if [ -n "$HAVE_CC" ]; then
    step compiled-library compiled
else
    echo "       (no C compiler on this machine's PATH: both passes decode with the torch fallback)"
fi

# ---- 2. no C compiler on PATH (the venv's bin and links to basic tools) and a new empty home
HOME_DIR=$WORK/home-no-compiler
mkdir -p "$HOME_DIR/tmp"
TOOLS=$WORK/tools
mkdir -p "$TOOLS"
for tool in sh bash env cat ls mkdir rm mv cp ln head tail grep sed awk wc sort uname date \
    dirname basename readlink mktemp tr find sleep id; do
    found=$(command -v "$tool" || true)
    [ -n "$found" ] && ln -s "$found" "$TOOLS/$tool"
done
NO_CC="$VENV/bin:$TOOLS"
no_compiler() {
    for compiler in cc gcc c99 clang tcc; do
        if run_clean "$NO_CC" sh -c "command -v $compiler"; then
            echo "$compiler is on the PATH meant to have none" >&2
            return 1
        fi
    done
    echo "no C compiler on $NO_CC"
}
step no-compiler-on-path no_compiler
commands no-compiler "$NO_CC"
fell_back() {  # (in a step, set -e is off: each check returns its own failure)
    grep -h "could not be built or loaded" "$LOGS"/no-compiler-predict.log \
        || { echo "parser-predict did not say it fell back to the torch decoders" >&2; return 1; }
    if ls "$HOME_DIR"/.cache/parser/native/*.so "$HOME_DIR"/tmp/parser-native-*/*.so 2>/dev/null; then
        echo "a compiled library appeared without a compiler" >&2
        return 1
    fi
}
step torch-fallback fell_back
# the first pass's model through the pure-torch decoders: the same trees as the compiled ones
step no-compiler-same-trees run_clean "$NO_CC" parser-predict \
    "checkpoint=$WORK/with-compiler/run/checkpoints/best.pt" "input=$FEW" \
    "output=$WORK/no-compiler/pred-first-model.conllu"
same_trees() {
    cmp "$WORK/with-compiler/pred.conllu" "$WORK/no-compiler/pred-first-model.conllu"
}
[ -z "$HAVE_CC" ] || step same-trees same_trees

printf 'wheel check passed in %ds: %s\n' "$((SECONDS - START))" "$(basename "$WHEEL")"
