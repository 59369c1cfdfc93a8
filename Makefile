# The two entry points of the README: `make demo` and `make test`. Both set up .venv first.
# `make demo DEMO_EXIT=1` stops the stack once the demo campaign is done (what CI runs).
PY ?= python3
# where pip finds torch: its configured index by default; on a machine that reaches PyPI,
# TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build (PyPI's default is CUDA)
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin

# `make demo PORT=8100`: the API on another port
PORT ?= 8000
# `make docs DOCS_PORT=...`: where `make docs` serves the manual
DOCS_PORT ?= 8001
export NO_MKDOCS_2_WARNING := 1

.PHONY: install demo test test-fast docs bench-core bench-service

$(BIN)/fbgp-al: pyproject.toml
	command -v redis-server >/dev/null || (apt-get update -qq && apt-get install -y -qq redis-server)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet -e '.[server,dev]'
	# compile the workers' NUTS kernels (numba's cache) once here, not in every worker's first start
	OMP_NUM_THREADS=1 $(BIN)/python -c "from fbgp_al.worker.mcmc import sample_posterior; \
	sample_posterior([[0.5]], [0.0], chains=1, warmup=2, samples=2)"
	touch $@

install: $(BIN)/fbgp-al
	@echo "fbgp-al and the SDK are in $(BIN): run $(BIN)/fbgp-al, or put it on your PATH:"
	@echo '  export PATH="$$PWD/$(BIN):$$PATH"'

demo: install
	$(BIN)/fbgp-al up --port $(PORT) --demo gramacy1d $(if $(DEMO_EXIT),--exit-after-demo)

test: install
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mkdocs build --strict --quiet
	$(BIN)/pytest -n auto --dist loadscope

# the manual, served at http://127.0.0.1:$(DOCS_PORT) while you edit docs/
docs: install
	$(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)
# the tests but the slow ones (the fault and soak tests, the long samplings): what to run while
# changing the code
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -m "not slow" -n auto --dist loadscope

bench-core: install
	$(BIN)/fbgp-al bench-core

bench-service: install
	$(BIN)/fbgp-al bench-service
