# The two entry points of the README: `make demo` and `make test`. Both set up .venv first.
# `make demo DEMO_EXIT=1` stops the stack once the demo campaign is done (what CI runs).
PY ?= python3
# where pip finds torch: its configured index by default; on a machine that reaches PyPI,
# TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build (PyPI's default is CUDA)
TORCH_INDEX ?=
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test test-fast bench-core bench-service

$(BIN)/fbgp-al: pyproject.toml
	command -v redis-server >/dev/null || (apt-get update -qq && apt-get install -y -qq redis-server)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install --quiet -e '.[server,dev]'
	# compile the workers' NUTS kernels (numba's cache) once here, not in every worker's first start
	OMP_NUM_THREADS=1 $(BIN)/python -c "from worker.mcmc import sample_posterior; \
	sample_posterior([[0.5]], [0.0], chains=1, warmup=2, samples=2)"
	touch $@

install: $(BIN)/fbgp-al

demo: install
	$(BIN)/fbgp-al up --demo gramacy1d $(if $(DEMO_EXIT),--exit-after-demo)

test: install
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest

# the tests but the fault and soak ones (marked slow): what to run while changing the code
test-fast: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -m "not slow"

bench-core: install
	$(BIN)/fbgp-al bench-core

bench-service: install
	$(BIN)/fbgp-al bench-service
