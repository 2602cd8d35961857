# The two commands a new machine needs: `make demo` and `make test`.
# Both create .venv when it is missing and install memidex into it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.memidex-installed
N      ?= 100000

.PHONY: demo test lint bench docs clean bytecode

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

# An editable install leaves memidex's modules uncompiled, and with PYTHONDONTWRITEBYTECODE
# set every command would compile them again (~30-60 ms); pip compiles on a normal install.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q src

## demo: the main job on the bundled example knowledge (shop-web)
demo: $(STAMP) bytecode
	@$(BIN)/python scripts/demo.py  # the index, a search, a brief, the check, what each run taught

## test: lint, type-check and the test suite, with the coverage of src/ (gated)
COV_MIN ?= 91  # measured 92.2% of src/ (subprocesses included); see pyproject
JOBS ?= 2      # pytest-xdist workers: the suite takes ~3.5 min on 2 cores, ~6.5 min on one
test: $(STAMP) lint
	$(BIN)/pytest -n $(JOBS) --cov --cov-report=term-missing:skip-covered --cov-fail-under=$(COV_MIN)

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy

## bench: the benchmark at N records (default 100000), raw limit measured in the same run
bench: $(STAMP) bytecode
	$(BIN)/python bench/run.py --n $(N)

## docs: regenerate docs/cli.md, the diagram in docs/architecture.md and the MCP tools' output schemas (tests check all three)
docs: $(STAMP)
	$(BIN)/python scripts/gen_cli_docs.py
	$(BIN)/python scripts/gen_api_docs.py
	$(BIN)/python scripts/import_graph.py --write
	$(BIN)/python scripts/gen_mcp_schemas.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

## realloop: record the real loop (docs/realloop.md): npm ci, Debian's chromium if missing, the suite once per scheduled run, then the scoreboard
.PHONY: realloop
realloop: $(STAMP)
	@test -x /usr/bin/chromium || (apt-get update -q && apt-get install -y -q chromium)
	cd bench/realloop && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund
	$(BIN)/python bench/realloop/record.py
	$(BIN)/python bench/realloop/score.py; $(BIN)/python bench/realloop/score.py --without-inventory
