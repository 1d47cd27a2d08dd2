# Two commands do all the set-up on a fresh machine with Python 3.11 and pip:
#   make book   execute every notebook at book scale and render _build/html
#   make test   lint, unit tests, every notebook at smoke scale, output checks, gpu dry run, strict smoke build
# and, on a machine with one CUDA GPU:
#   make gpu        the CUDA tests, then every notebook at the gpu scale (refuses to start without CUDA)
#   make gpu-check  the CUDA tests and each chapter's headline kernel at gpu sizes (minutes)
#   make gpu-dry    every notebook at SCALE=gpu on the CPU, loop counts cut (ICML26_DRY=1), no claim asserted
#   make budget     each notebook's time at the gpu scale projected from its cost.py on the CPU (fails over 300 s)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
JOBS   ?= 2
# The CPU build of torch lies on local disk on the CI machines; a bare "torch" pulls a CUDA build.
TORCH  ?= torch==2.13.0

.PHONY: install test unit notebooks nbval book book-smoke gpu gpu-check gpu-dry gpu-guard budget lint clean

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
	$(BIN)/python -m pytest -q -n $(JOBS) -m "not cuda" tests

notebooks: install
	$(BIN)/python -m icml26.book run --scale smoke --jobs $(JOBS)

nbval: notebooks
	$(BIN)/python -m icml26.book nbval --scale smoke --jobs $(JOBS)

book-smoke: notebooks
	$(BIN)/python -m icml26.book build --scale smoke

test: install
	$(MAKE) lint
	$(MAKE) budget
	$(MAKE) notebooks
	$(MAKE) nbval
	$(MAKE) gpu-dry
	$(MAKE) book-smoke
	$(MAKE) unit

book: install
	$(BIN)/python -m icml26.book all --scale book --jobs $(JOBS)

# Executed into _build/executed/gpu-dry, never into the gpu scale's own cache.
gpu-dry: install
	$(BIN)/python -m icml26.book run --scale gpu --dry --jobs $(JOBS)

# The cost model (issue 43): one step of each kind of work per notebook, counted on the CPU, projected on one H100.
budget: install
	$(BIN)/python -m icml26.book.gpu budget --scale gpu

# Refuses to go on without a CUDA build of torch that sees a device (and says how to install one).
gpu-guard: install
	$(BIN)/python -m icml26.book.gpu guard

gpu: gpu-guard
	ICML26_REQUIRE_CUDA=1 $(BIN)/python -m pytest -q -m cuda tests
	$(BIN)/python -m icml26.book all --scale gpu --jobs 1

gpu-check: gpu-guard
	ICML26_REQUIRE_CUDA=1 $(BIN)/python -m pytest -q -m cuda tests
	$(BIN)/python -m icml26.book.gpu budget --scale gpu
	$(BIN)/python -m icml26.book.gpu check

clean:
	rm -rf _build
