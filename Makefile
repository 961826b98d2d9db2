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
