# stacklens — the two commands: `make demo` (run the main job) and `make test` (all tests).
# Every target installs what it needs, idempotently: Debian packages, the virtualenv,
# the hook library and the example programs.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stacklens-installed

.PHONY: all setup debian venv hooks examples fabric codec demo up test lint format clean

all: setup

setup: debian venv hooks examples fabric codec

debian:
	@scripts/install-debian-packages.sh

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@

# The library for Open MPI, MPICH and with sanitizers, plus its test programs.
hooks: debian
	$(MAKE) -C mpi_pmpi_hooks variants

examples: debian
	$(MAKE) -C examples
	$(MAKE) -C examples MPICC=mpicc.mpich BUILD=build-mpich

# libslfabric.so: the C helper of the fabric sampler (libibnetdisc/libibmad).
fabric: debian
	$(MAKE) -C collector/fabric/csrc

# libslcodec.so: the collector's compiled frame scanner and COPY encoder.
codec: debian
	$(MAKE) -C collector/csrc

demo: setup
	$(VENV)/bin/stacklens demo $(DEMO_ARGS)

up: setup
	$(VENV)/bin/stacklens up

# Style (ruff) and types (mypy: strict on the API contract, server, store and contract;
# see pyproject.toml), after the C builds (-Werror).
lint: venv hooks fabric codec
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	$(MAKE) -C mpi_pmpi_hooks clean
	$(MAKE) -C collector/fabric/csrc clean
	$(MAKE) -C collector/csrc clean
	$(MAKE) -C examples clean
