# The two commands a new machine needs: `make demo` and `make test`.
# Both create .venv when it is missing and install memidex into it.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.memidex-installed
N      ?= 100000

.PHONY: demo test deps lint bench docs clean bytecode

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

# An editable install leaves memidex's modules uncompiled, and with PYTHONDONTWRITEBYTECODE
# set every command would compile them again (~30-60 ms); pip compiles on a normal install.
# The tests start memidex in hundreds of subprocesses: `test` needs it as much as `demo`.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q src

## demo: the main job on the bundled example knowledge (shop-web)
demo: $(STAMP) bytecode
	@$(BIN)/python scripts/demo.py  # the index, a search, a brief, the check, what each run taught

## test: lint, type-check and the test suite, with the coverage of src/ (gated)
COV_MIN ?= 91  # measured 92.2% of src/ (subprocesses included); see pyproject
JOBS ?= 2      # pytest-xdist workers: the suite takes ~9 min on 2 cores
test: $(STAMP) deps lint bytecode
	$(BIN)/pytest -n $(JOBS) --cov --cov-report=term-missing:skip-covered --cov-fail-under=$(COV_MIN)

## deps: what the tests run for real besides Python: PostgreSQL 15 with pgvector (scripts/install_pg.sh),
## Debian's chromium (the dashboard's browser tests), node/npm (the TypeScript MCP client), faketime
## (a process with faked clocks against the writer lease) and bindfs (a FUSE mount the warm path's
## watcher must not trust). As root it installs what is missing from the package registries; as a
## user it says what is missing (the tests needing it then fail, saying so). When everything is
## there it takes ~10 ms.
deps:
	@bash scripts/install_pg.sh || test "$$(id -u)" != 0
	@test -x /usr/bin/chromium || { test "$$(id -u)" = 0 && apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends chromium >/dev/null; } || \
		echo "make deps: /usr/bin/chromium is missing: as root, apt-get install chromium" >&2
	@command -v faketime >/dev/null || { test "$$(id -u)" = 0 && apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends faketime >/dev/null; } || \
		echo "make deps: faketime is missing: as root, apt-get install faketime" >&2
	@command -v npm >/dev/null || { test "$$(id -u)" = 0 && apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null; } || \
		echo "make deps: node/npm are missing: as root, apt-get install nodejs npm" >&2
	@command -v bindfs >/dev/null || { test "$$(id -u)" = 0 && apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends bindfs >/dev/null; } || \
		echo "make deps: bindfs is missing: as root, apt-get install bindfs" >&2

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
