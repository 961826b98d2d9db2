# Every target sets up .venv itself, so a fresh clone needs only Python 3.11-3.13 and pip.
# Another Python: make lab PYTHON=python3.12 (or a full path, e.g. PYTHON=/usr/bin/python3).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Pinned so pip takes the CPU wheel this project is tested with (it lies on disk
# here); elsewhere set TORCH_INDEX to PyTorch's CPU index to avoid the CUDA build.
TORCH := torch==2.13.0
TORCH_INDEX ?=
# setuptools announces every editable install in a 10-line banner that reads like a
# failure; it is information only (this filter matches its first words, nothing else).
QUIET_PIP := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet
# Two installs: what a learner needs (the lab extra), and the test suite on top (dev).
LAB_STAMP := $(VENV)/.installed-lab
DEV_STAMP := $(VENV)/.installed-dev
# Learner copies of the notebooks (tools/workshop.py), which `make lab` opens;
# make lab LAB_DIR=notebooks opens the committed notebooks, outputs and all.
WORKSHOP := workshop
LAB_DIR ?= $(WORKSHOP)
# JupyterLab reads default settings from its application folder's overrides.json, and, with
# --LabApp.custom_css=True, a stylesheet from <its config folder>/custom/custom.css: the workshop's
# lab gets a config folder of its own in the venv, holding tools/jupyterlab/custom/custom.css
# (printed output breaks between words, never inside one).
LAB_OVERRIDES := $(VENV)/share/jupyter/lab/settings/overrides.json
LAB_CONFIG := $(VENV)/etc/jupyter-workshop
LAB_CSS := $(LAB_CONFIG)/custom/custom.css
# Jupyter refuses to start as root unless told to (containers, CI machines).
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root,)
# The fast tier: no notebooks (only tests/ is collected), no browser, no torchrun, no
# website build, no vLLM, and not the long tests; one pytest worker per core (pytest-xdist).
FAST := -n auto -m "not browser and not torchrun and not slow and not docs and not vllm"

.PHONY: venv demo check lint test test-slow test-all test-fast lab workshop rerun bench mutants train clean notebooks cite-check

venv: $(DEV_STAMP)

$(LAB_STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found: pass a Python 3.11, 3.12 or 3.13 you have, e.g. make $(MAKECMDGOALS) PYTHON=python3.12"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(QUIET_PIP) -e ".[lab]"
	touch $(LAB_STAMP)

$(DEV_STAMP): $(LAB_STAMP)
	$(QUIET_PIP) -e ".[dev]"
	touch $(DEV_STAMP)

$(LAB_OVERRIDES): tools/jupyterlab/overrides.json $(LAB_STAMP)
	mkdir -p $(dir $@) && cp $< $@

$(LAB_CSS): tools/jupyterlab/custom/custom.css $(LAB_STAMP)
	mkdir -p $(dir $@) && cp $< $@

demo: $(LAB_STAMP)
	$(BIN)/python -m minispec demo

# The homework: proves the install works, prints no answer.
check: $(LAB_STAMP)
	$(BIN)/python -m minispec check

# ruff, configured in pyproject.toml: pyflakes, import order, bugbear (under a second).
lint: $(DEV_STAMP)
	$(BIN)/ruff check .

# The default suite (the README's test command): the linter, then every test and notebook but
# the slow tier and vLLM's own code (make vllm-check runs those tests), one pytest worker per
# core. --dist loadfile keeps a file's tests on one worker, so a notebook's cells run in order in
# one kernel.
SUITE := -n auto --dist loadfile
test: lint
	$(BIN)/python -m pytest $(SUITE) -m "not slow and not vllm"

# The slow tier: worker processes, the statistical tests, the long property sweeps and greedy
# grids, every notebook re-run and restarted (tools/rerun.py). CI runs it after make test.
test-slow: lint
	$(BIN)/python -m pytest tests $(SUITE) -m "slow and not vllm"

test-all: test test-slow

test-fast: lint
	$(BIN)/python -m pytest tests $(FAST)

# every notebook's cells run twice and after a kernel restart at 3 cells (tools/rerun.py);
# about 40 minutes on 2 loaded cores, so in the slow tier only
rerun: $(DEV_STAMP)
	$(BIN)/python tools/rerun.py notebooks/[0-9][0-9]_*.ipynb --restarts 3

workshop: $(LAB_STAMP)
	$(BIN)/python tools/workshop.py notebooks/*.ipynb --out $(WORKSHOP)

# One intra-op thread per kernel unless told otherwise: the models are tiny, and on a
# laptop whose cores the browser and other kernels share, a second thread mostly waits
# (docs/workshop.md, section 2).
lab: $(LAB_OVERRIDES) $(LAB_CSS) $(if $(filter $(WORKSHOP),$(LAB_DIR)),workshop)
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} JUPYTER_CONFIG_DIR=$(abspath $(LAB_CONFIG)) \
	  $(BIN)/jupyter lab --LabApp.custom_css=True $(LAB_FLAGS) $(LAB_DIR)

bench: $(LAB_STAMP)
	$(BIN)/python benchmarks/bench_spec_decode.py
	$(BIN)/python benchmarks/bench_eagle.py
	$(BIN)/python benchmarks/bench_messages.py
	$(BIN)/python benchmarks/bench_pipeline.py

# which kind of test catches which runner slip (the explorer's invariants, greedy equality,
# vLLM's acceptance rule); about 20 minutes on 2 cores
mutants: $(LAB_STAMP)
	$(BIN)/python benchmarks/bench_mutants.py

train: $(LAB_STAMP)
	$(BIN)/python -m training.train --out minispec/checkpoints

clean:
	rm -rf $(VENV) *.egg-info

# Re-run every notebook in place, so the stored outputs (what nbval compares) match the code;
# MINISPEC_REVEAL=1: each prediction's reveal stores its answer (learner copies clear it).
notebooks: $(LAB_STAMP)
	MINISPEC_REVEAL=1 $(BIN)/jupyter nbconvert --to notebook --execute --inplace notebooks/*.ipynb

# --- the walkthrough as a website (docs/notebooks_and_site.md: "The walkthrough as a website") ---
# `make docs` builds build/docs/html from the notebooks' stored outputs (nothing is
# executed); `make docs-serve` serves it on 127.0.0.1.
.PHONY: docs docs-serve
DOCS_STAMP := $(VENV)/.docs-installed
DOCS_PORT ?= 8000

$(DOCS_STAMP): $(DEV_STAMP) pyproject.toml
	$(QUIET_PIP) -e ".[docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(BIN)/python tools/build_docs.py

docs-serve: docs
	@echo "the site: http://127.0.0.1:$(DOCS_PORT)/ (Ctrl-C stops it)"
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory build/docs/html $(DOCS_PORT)

# The first run on a GPU (docs/executors.md: "Devices, and what has not been run"): greedy equality with
# the CPU and tokens/s on cuda, both executors; without CUDA one line, and exit status 0.
.PHONY: gpu-check
gpu-check: $(LAB_STAMP)
	$(BIN)/python -m minispec gpu-check

# vLLM's own code on minispec's schedules (reference/, beside the package): on first use it
# builds vLLM's environment in a cache outside the repository ($MINISPEC_VLLM_CACHE, else
# $XDG_CACHE_HOME or ~/.cache, then minispec-vllm/); prints the table of equal stage-steps;
# then runs the tests that need vLLM, which fail rather than skip here.
VLLM_RANDOM ?= 200
# Model Runner V2's random schedules: 20 by default (seeds 0-19). Its part of the check took
# 485 s for 20 on 2 cores shared with other work (147 s of CPU); 200 would take about ten
# times as long, past what CI gives it. The 200-schedule run (docs/checked_against_vllm.md, "Model Runner V2,
# against vLLM 0.29.0 and 0.30.0": every row as expected, seed 40 counted as "unwaited") is
#   python -m reference --v2-only --v2-mismatched --random-v2 50 --v2-first-seed S
# for S = 0, 50, 100, 150.
VLLM_RANDOM_V2 ?= 20
.PHONY: vllm-check
vllm-check: $(DEV_STAMP)
	TORCH_INDEX=$(TORCH_INDEX) $(BIN)/python -m reference --random $(VLLM_RANDOM) --random-v2 $(VLLM_RANDOM_V2)
	MINISPEC_REQUIRE_VLLM=1 $(BIN)/python -m pytest tests/test_vllm_reference.py tests/test_vllm_reference_v2.py \
		tests/test_vllm_reference_explore.py -q

# The explorer's schedules (its DEFAULT scope) through vLLM's own state code: V1 0.9.2, 0.14.0,
# 0.33.0 (synchronous) and V2 0.29.0, 0.30.0, 0.33.0 (sync and async) (reference/explore.py).
# Every schedule would take many hours on 2 shared cores: these set how many of each engine shape,
# smallest first. The defaults are the run in docs/checked_against_vllm.md ("The explorer's
# schedules"), about 20 minutes for V1 and 25 for V2 there.
VLLM_EXPLORE ?= 250
VLLM_EXPLORE_V2 ?= 25
VLLM_EXPLORE_V2_ASYNC ?= 20
.PHONY: vllm-explore
vllm-explore: $(DEV_STAMP)
	TORCH_INDEX=$(TORCH_INDEX) $(BIN)/python -m reference explore --design V1 --per-shape $(VLLM_EXPLORE)
	$(BIN)/python -m reference explore --design V2 --scheduling sync --per-shape $(VLLM_EXPLORE_V2)
	$(BIN)/python -m reference explore --design V2 --scheduling async --per-shape $(VLLM_EXPLORE_V2_ASYNC)

# Every citation of vLLM release source in the repository, checked against that release
# (tools/cite_check.py): the cited releases' Python sources are fetched once into make
# vllm-check's cache (reference/sources.py); a citation that drifts fails.
cite-check: $(LAB_STAMP)
	$(BIN)/python tools/cite_check.py
