# adk_actors developer commands. Every target installs what it needs into .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SRC := adk_actors actor_tests samples

.PHONY: install test check fix demo bench clean

$(STAMP): pyproject.toml setup.cfg
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,postgres]'
	touch $(STAMP)

install: $(STAMP)

# The whole suite, in TEST_WORKERS pytest-xdist worker processes (2: one per core of the CI machine; 0 runs it in
# this process). pytest's exit code 5 ("no tests collected") is a failure here.
# Tests marked `serial` (timing bounds) run afterwards in one process, with nothing else running.
TEST_WORKERS ?= 2
test: install
	@$(BIN)/python -m pytest -n $(TEST_WORKERS) -m "not serial"; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests"; exit 1; fi; \
	$(BIN)/python -m pytest -m serial; rc2=$$?; \
	if [ $$rc2 -eq 5 ]; then echo "make test: no serial tests collected"; exit 1; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$rc2

check: install
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy
	$(BIN)/python -m adk_actors.devtools.layers

fix: install
	$(BIN)/ruff check --fix $(SRC)
	$(BIN)/ruff format $(SRC)

demo: install
	$(BIN)/python samples/quickstart.py

bench: install
	$(BIN)/python -m adk_actors.devtools.bench --append docs/PERFORMANCE.md

clean:
	rm -rf $(VENV) build *.egg-info var
