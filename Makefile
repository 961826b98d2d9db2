# Every target sets up .venv itself, so a fresh clone needs only Python 3.11 and pip.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Pinned so pip takes the CPU wheel this project is tested with (it lies on disk
# here); elsewhere set TORCH_INDEX to PyTorch's CPU index to avoid the CUDA build.
TORCH := torch==2.13.0
TORCH_INDEX ?=
STAMP := $(VENV)/.installed
# Jupyter refuses to start as root unless told to (containers, CI machines).
LAB_FLAGS := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: venv demo test lab bench train clean notebooks

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m minispec demo

test: $(STAMP)
	$(BIN)/python -m pytest

lab: $(STAMP)
	$(BIN)/jupyter lab $(LAB_FLAGS) notebooks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_spec_decode.py
	$(BIN)/python benchmarks/bench_messages.py
	$(BIN)/python benchmarks/bench_pipeline.py

train: $(STAMP)
	$(BIN)/python -m minispec.training.train --out minispec/checkpoints

clean:
	rm -rf $(VENV) *.egg-info

# Re-run every notebook in place, so the stored outputs (what nbval compares) match the code.
notebooks: $(STAMP)
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace notebooks/*.ipynb

# --- the walkthrough as a website (README: "The walkthrough as a website") ---
# `make docs` builds build/docs/html from the notebooks' stored outputs (nothing is
# executed); `make docs-serve` serves it on 127.0.0.1. The widget script is the npm
# package below, fetched once into build/docs-js (npm pack, so no node_modules).
.PHONY: docs docs-serve
DOCS_STAMP := $(VENV)/.docs-installed
DOCS_JS := build/docs-js/widgets
HTML_MANAGER := @jupyter-widgets/html-manager@1.0.15
DOCS_PORT ?= 8000

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $(DOCS_STAMP)

$(DOCS_JS)/embed.js:
	rm -rf build/docs-js && mkdir -p build/docs-js/npm $(DOCS_JS)
	cd build/docs-js/npm && npm pack --silent $(HTML_MANAGER) >/dev/null && tar xzf *.tgz
	cp build/docs-js/npm/package/dist/embed.js build/docs-js/npm/package/dist/*.woff* \
	   build/docs-js/npm/package/dist/*.ttf build/docs-js/npm/package/dist/*.eot \
	   build/docs-js/npm/package/dist/*.svg $(DOCS_JS)/
	rm -rf build/docs-js/npm

docs: $(DOCS_STAMP) $(DOCS_JS)/embed.js
	$(BIN)/python tools/build_docs.py

docs-serve: docs
	@echo "the site: http://127.0.0.1:$(DOCS_PORT)/ (Ctrl-C stops it)"
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory build/docs/html $(DOCS_PORT)
