# Two commands do all the set-up on a fresh machine with Python 3.11 and pip:
#   make book   execute every notebook at book scale and render _build/html
#   make test   lint, unit tests, every notebook at smoke scale, output checks, strict smoke build
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2
# The CPU build of torch lies on local disk on the CI machines; a bare "torch" pulls a CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: install test unit notebooks nbval book book-smoke gpu lint clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	@touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check lib tests
	$(BIN)/python -m icml26.book check

unit: install
	$(BIN)/python -m pytest -q -m "not cuda" tests

notebooks: install
	$(BIN)/python -m icml26.book run --scale smoke --jobs $(JOBS)

nbval: notebooks
	$(BIN)/python -m icml26.book nbval --scale smoke --jobs $(JOBS)

book-smoke: notebooks
	$(BIN)/python -m icml26.book build --scale smoke

test: install
	$(MAKE) lint
	$(MAKE) notebooks
	$(MAKE) nbval
	$(MAKE) book-smoke
	$(MAKE) unit

book: install
	$(BIN)/python -m icml26.book all --scale book --jobs $(JOBS)

gpu: install
	$(BIN)/python -m pytest -q -m cuda tests
	$(BIN)/python -m icml26.book all --scale gpu --jobs 1

clean:
	rm -rf _build
