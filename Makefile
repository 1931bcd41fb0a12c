# The two entry points the README names: `make report` (the main job) and `make test`.
# Both set up .venv on first use; nothing else needs to be installed by hand.

VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
SAMPLES ?= 100
OUT ?= out/compare
NPROC := $(shell nproc 2>/dev/null || echo 2)
# llama-cpp-python compiles llama.cpp from source (most of a first install's time). The
# package loads only libllama and libggml: its multimodal library (mtmd, `LLAVA_BUILD`) is
# not built, nor (said outright, in case a release turns them on) llama.cpp's tests,
# examples, tools, server and libcurl support; the build runs on every core.
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF
# On x86-64 the build is portable (AVX2, FMA, F16C) rather than `-march=native`: a native
# build on a CPU with AMX (llama.cpp then runs Q4 models on AMX tiles) crashed with a
# segmentation fault on the first token in a container here.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS += -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
endif

.PHONY: report test lint typecheck pytest services bench bench-quick clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch 2.13.0 is the CPU build; installing it first keeps a CUDA build (several GB) out.
	$(PIP) install -q "torch==2.13.0"
	# llama-cpp-python is built first and never taken from pip's wheel cache: the cache is
	# keyed by the source archive alone, not by CMAKE_ARGS, so a wheel built earlier with
	# other flags (a native AMX build, which crashes here) would be installed unseen.
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) \
	  $(PIP) install -q --no-cache-dir "llama-cpp-python[server]>=0.3"
	$(PIP) install -q -e ".[embeddings,dev,llm]"
	touch $@

report: $(VENV)/.installed
	$(PY) jobs/compare_documents.py --samples $(SAMPLES) --out $(OUT)

# Services the tests use: a redis-server binary (the tests start and stop their own).
services:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "installing redis-server"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check swarm_ray tests bench jobs
	$(VENV)/bin/ruff format --check swarm_ray tests bench jobs

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

pytest: $(VENV)/.installed services
	$(VENV)/bin/pytest -q

test: lint typecheck pytest

bench: $(VENV)/.installed
	$(PY) bench/fanout.py
	$(PY) bench/documents.py
	$(PY) bench/video.py
	$(PY) bench/gateway.py
	$(PY) bench/llm.py
	$(PY) bench/llm.py --engine openai
	$(PY) bench/llm_budget.py

# Every benchmark in its small mode (each about a minute: the real path, less work), as CI
# runs them after the tests: a bench that can no longer produce its figures fails the run
# (non-zero exit), while its goals are printed, not asserted (timings are noisy). One that
# hangs is stopped after QUICK_LIMIT seconds, and fails too.
QUICK_LIMIT ?= 240
quick = start=$$(date +%s); timeout $(QUICK_LIMIT) $(PY) $(1) --quick \
  || { echo "FAILED: $(1) --quick (exit $$?)" >&2; exit 1; }; \
  echo "== $(1) --quick: $$(( $$(date +%s) - start )) s wall"

bench-quick: $(VENV)/.installed
	@$(call quick,bench/fanout.py)
	@$(call quick,bench/documents.py)
	@$(call quick,bench/video.py)
	@$(call quick,bench/gateway.py)
	@$(call quick,bench/llm.py)
	@$(call quick,bench/llm.py --engine openai)
	@$(call quick,bench/llm_budget.py)
	@$(call quick,bench/datasheets.py -q)

clean:
	rm -rf $(VENV) out
