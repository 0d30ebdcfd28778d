# trainkit: `make cluster train destroy` runs the main job; `make test` runs every test tier.
# Both create .venv and install what they need. SPEC/TRAIN pick other cluster specs / train configs.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CHECKOV_VENV := .venv-checkov
STANDIN_VENV := .venv-standin
SPEC ?= examples/clusters/local.yaml
TRAIN ?= examples/train/digits.yaml
PYTEST_ARGS ?=
WORKDIR ?=
WS := $(if $(WORKDIR),--workdir $(WORKDIR))
# torch is pinned in pyproject's `train` extra (an unpinned torch pulls a multi-GB CUDA build).
export CHECKPOINT_DISABLE := 1
export OMP_NUM_THREADS ?= 1

.PHONY: help venv venv-dev checkov standin cluster train destroy test test-gpu test-unit house docs docs-pages lint bench module-docs clean

help:
	@echo "make cluster train destroy   main job on SPEC=$(SPEC) with TRAIN=$(TRAIN) [WORKDIR=dir]"
	@echo "make test                    every test tier (unit, dist, infra, e2e)"
	@echo "make bench                   benchmarks (side-by-side ratios)"

$(BIN)/.installed-run: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	@# the distribution was named trainkit before it became trainkit-clusters: drop an old install
	$(BIN)/pip uninstall -q -y trainkit 2>/dev/null || true
	$(BIN)/pip install -q -e '.[control,train]'
	touch $@

$(BIN)/.installed-dev: $(BIN)/.installed-run
	$(BIN)/pip install -q -e '.[control,train,dev]'
	touch $@

$(BIN)/.installed-docs: $(BIN)/.installed-dev
	$(BIN)/pip install -q -e '.[control,train,dev,docs]'
	touch $@

# checkov pins versions that clash with ours: it lives in its own venv.
$(CHECKOV_VENV)/bin/checkov:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --upgrade pip
	$(CHECKOV_VENV)/bin/pip install -q 'checkov>=3.2,<4'

# Byte-compile trainkit's own modules (an editable install has no .pyc until a process may write
# one, and PYTHONDONTWRITEBYTECODE stops that): otherwise every trainkit process compiles the
# modules it imports again, 0.13 s of CPU per CLI start here, and the tests start hundreds.
# The seed clouds' provider stand-ins (tests/standin) speak terraform's plugin protocol through
# PyPI `tf` (grpcio, protobuf 5), which clash with trainkit's own pins: they too get a venv.
$(STANDIN_VENV)/bin/.installed:
	$(PYTHON) -m venv $(STANDIN_VENV)
	$(STANDIN_VENV)/bin/pip install -q --upgrade pip
	$(STANDIN_VENV)/bin/pip install -q 'tf==1.2.0'
	touch $@

venv: $(BIN)/.installed-run
	@$(BIN)/python -m compileall -q trainkit
venv-dev: $(BIN)/.installed-dev
	@$(BIN)/python -m compileall -q trainkit
checkov: $(CHECKOV_VENV)/bin/checkov
standin: $(STANDIN_VENV)/bin/.installed

# With `train` among the goals, `cluster` and `destroy` become train's --up and --down: one command
# applies, trains and destroys, and the destroy happens whatever the run does (a failed train used
# to stop make before `destroy`, leaving the nodes billing). Alone, each goal runs its command.
GOALS_TRAIN := $(filter train,$(MAKECMDGOALS))
UP := $(if $(filter cluster,$(MAKECMDGOALS)),--up --yes)
DOWN := $(if $(filter destroy,$(MAKECMDGOALS)),--down)

cluster: venv
	$(if $(GOALS_TRAIN),@echo "cluster: applied by train --up",$(BIN)/trainkit apply $(SPEC) $(WS) --yes)

train: venv
	$(BIN)/trainkit train $(SPEC) $(WS) --config $(TRAIN) $(UP) $(DOWN)

destroy: venv
	$(if $(GOALS_TRAIN),@echo "destroy: done by train --down",$(BIN)/trainkit destroy $(SPEC) $(WS) --yes)

# The house first (seconds): layers/circles and ruff; then the unit tier on every core (its tests
# share nothing); then the tiers that start processes, servers and namespaces on TEST_WORKERS
# workers: a test module runs whole on one worker, the longest first by their measured time
# (tests/xdist_groups.py), and each module with network-namespace hosts has its own names and /24
# (tests/e2e/netns.py: names_for). 4 on 2 cores: the moto tests mostly wait on the aws provider's
# polls while the torchrun and Ansible tests use the CPU (measured: 1775 s with 4, 1897 s with 3,
# the same commit's tests on one 2-core machine).
TEST_WORKERS ?= 4
test: venv-dev checkov standin house docs
	CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov $(BIN)/pytest -m unit -n auto --durations=15 $(PYTEST_ARGS)
	CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov $(BIN)/pytest -m "not gpu and not unit" \
	  -n $(TEST_WORKERS) --dist loadfile --durations=20 $(PYTEST_ARGS)

house: venv-dev
	$(BIN)/lint-imports
	$(BIN)/ruff check .

# The docs site: the reference pages (CLI, spec fields and schema, train config keys, exit codes,
# environment) come from the code (trainkit/docsgen): `docs` stops when a committed page differs
# from what the code gives (`make docs-pages` rewrites them; a test that silently rewrote tracked
# files would hide it), then mkdocs builds docs/ into site/ (git-ignored); --strict fails on a
# broken link or a page missing from the nav. NO_MKDOCS_2_WARNING: the theme's banner about its successor.
docs: $(BIN)/.installed-docs
	$(BIN)/python -m trainkit.docsgen --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

docs-pages: venv-dev
	$(BIN)/python -m trainkit.docsgen

# Only on a machine with an NVIDIA GPU: AMP, NCCL, NVML utilisation.
test-gpu: venv-dev
	$(BIN)/pytest -m gpu tests/gpu $(PYTEST_ARGS)

test-unit: venv-dev standin
	CHECKOV=$(CURDIR)/$(CHECKOV_VENV)/bin/checkov $(BIN)/pytest -m unit -n auto --durations=15 $(PYTEST_ARGS)

lint: venv-dev house
	$(BIN)/ansible-lint --offline ansible/
	terraform fmt -check -recursive terraform/

# Rewrite the Inputs/Outputs tables of terraform/modules/*/README.md from the .tf files.
module-docs: venv-dev
	$(BIN)/python terraform/tools/module_docs.py

bench: venv-dev
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) $(STANDIN_VENV) .trainkit .pytest_cache site
