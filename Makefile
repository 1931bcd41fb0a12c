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

.PHONY: report test lint typecheck pytest services bench bench-quick docs docs-build model clean

# The first run sets up .venv in about five minutes, most of it compiling llama.cpp. That
# build runs in the background (`pip wheel`, into a folder of its own) while torch and the
# rest install; the wheel is then installed from that folder and nothing else
# (`--only-binary`). It never comes from pip's wheel cache: the cache is keyed by the
# source archive alone, not by CMAKE_ARGS, so a wheel built earlier with other flags (a
# native AMX build, which crashes here) would be installed unseen. pip runs with -qq
# (errors only: a machine's pip configuration may warn about its own indexes, page after
# page); `editable_mode=compat` is the plain .pth editable install, which setuptools does
# not warn about. (`--no-compile` saved 50 s here and cost twice that in the first job,
# every Ray worker compiling the same modules at once.)
PIPQ := $(PIP) install -qq
LLAMA_WHEELS := $(VENV)/llama-wheel

$(VENV)/.installed: pyproject.toml
	@echo "== setting up $(VENV) (first run only: about 5 minutes on 2 cores)"
	@python3 -m venv $(VENV)
	@$(PIP) install -qq --upgrade pip
	@echo "-- compiling llama-cpp-python (llama.cpp on the CPU) in the background"
	@rm -rf $(LLAMA_WHEELS)
	@CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(NPROC) \
	  $(PIP) wheel -qq --no-deps --no-cache-dir -w $(LLAMA_WHEELS) "llama-cpp-python>=0.3" \
	  > $(VENV)/llama-build.log 2>&1 & echo $$! > $(VENV)/llama-build.pid
	@echo "-- installing torch (the CPU build, first: else pip picks a CUDA one of several GB)"
	@$(PIPQ) "torch==2.13.0"
	@echo "-- installing swarm-ray and its dependencies"
	@$(PIPQ) --config-settings editable_mode=compat -e ".[embeddings,dev]"
	@echo "-- waiting for llama-cpp-python's build"
	@pid=$$(cat $(VENV)/llama-build.pid); while kill -0 $$pid 2>/dev/null; do sleep 2; done; \
	  ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 \
	  || { cat $(VENV)/llama-build.log; echo "llama-cpp-python failed to build" >&2; exit 1; }
	@$(PIPQ) --find-links $(LLAMA_WHEELS) --only-binary llama-cpp-python \
	  --config-settings editable_mode=compat -e ".[embeddings,dev,llm]"
	@rm -rf $(LLAMA_WHEELS) $(VENV)/llama-build.pid
	@touch $@
	@echo "== $(VENV) is ready"

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
	$(PY) bench/noisy.py
	$(PY) bench/limits.py

# Every benchmark in its small mode (each about a minute: the real path, less work), as CI
# runs them after the tests: a bench that can no longer produce its figures fails the run
# (non-zero exit), while its goals are printed, not asserted (timings are noisy). One that
# hangs is stopped after QUICK_LIMIT seconds, and fails too. Its lines are printed as they
# come (unbuffered), and it is stopped with SIGABRT, on which Python's faulthandler prints
# every thread's stack: the log then says where it hung, not only that it did.
QUICK_LIMIT ?= 240
quick = start=$$(date +%s); PYTHONUNBUFFERED=1 PYTHONFAULTHANDLER=1 \
  timeout -s ABRT -k 10 $(QUICK_LIMIT) $(PY) $(1) --quick \
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
	@$(call quick,bench/noisy.py)
	@$(call quick,bench/limits.py)
	@$(call quick,bench/scale.py)
	@$(call quick,bench/datasheets.py -q)
	@$(call quick,bench/datasheets.py --lofo -q)

# The document extractor's learned choice: trains on the labeled families of the corpus
# (gold CSVs in its schema; LABELS= names your own) and writes the model into the package.
LABELS ?= ../shared/corpus/datasheets/multi
model: $(VENV)/.installed
	$(VENV)/bin/swarm-ray train-extractor --labels $(LABELS)

# The documentation site (MkDocs, Material): `make docs` serves it at http://127.0.0.1:8001
# (the gateway keeps 8000); CI builds it strictly, so a broken link or reference fails.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8001

docs-build: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) out
