"""Packaging: the two dependency lists agree, the checkpoints are what they claim."""

import os
import re
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from minispec.config import CHECKPOINT_DIR, DEFAULT_DRAFT, DEFAULT_TARGET
from minispec.training.corpus import full_text

ROOT = Path(__file__).resolve().parents[1]


PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]


def test_environment_yml_matches_pyproject():
    dev_only = [d for d in EXTRAS["dev"] if not d.startswith("minispec[")]
    declared = PROJECT["dependencies"] + EXTRAS["lab"] + dev_only
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = [p for p in pip if not p.startswith("-e")]
    assert sorted(listed) == sorted(declared)
    assert "-e .[dev]" in pip


def names(requirements):
    return {re.split(r"[<>=\[ ]", r, maxsplit=1)[0] for r in requirements}


def test_the_lab_extra_is_what_the_notebooks_import_and_no_test_tool():
    """A learner's install (`make lab`) gets JupyterLab and what the notebooks and checker
    import beyond the core, and none of the test suite's tools (playwright alone is 165 MB)."""
    assert names(EXTRAS["lab"]) == {"jupyterlab", "ipywidgets", "transformers", "scipy"}
    assert "matplotlib" in names(PROJECT["dependencies"])  # `minispec demo` after a bare `pip install`
    assert "minispec[lab]" in EXTRAS["dev"]
    assert names(EXTRAS["dev"]) - {"minispec"} == {"pytest", "pyyaml", "nbval", "hypothesis", "playwright"}


def test_license_is_an_spdx_string_and_the_pythons_are_declared():
    assert PROJECT["license"] == "Apache-2.0"  # a table makes setuptools print pages of warnings
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert backend == ["setuptools>=77"]  # the first setuptools that reads an SPDX string
    versions = {c.rsplit(" :: ", 1)[1] for c in PROJECT["classifiers"] if c.startswith("Programming Language")}
    assert versions == {"3.11", "3.12", "3.13"} and PROJECT["requires-python"] == ">=3.11"


def test_the_notebook_folder_holds_only_notebooks():
    assert {p.suffix for p in (ROOT / "notebooks").iterdir() if not p.name.startswith(".")} == {".ipynb"}


def test_jupyterlab_settings_turn_the_news_off():
    """`make lab` copies them into JupyterLab's overrides.json; the keys must exist in the
    installed JupyterLab's own schema, or JupyterLab ignores them."""
    import json

    overrides = json.loads((ROOT / "tools" / "jupyterlab" / "overrides.json").read_text())
    notification = overrides["@jupyterlab/apputils-extension:notification"]
    assert notification == {"fetchNews": "false", "checkForUpdates": False}
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    schema = json.loads((schemas / "@jupyterlab" / "apputils-extension" / "notification.json").read_text())
    assert set(notification) <= set(schema["properties"])
    assert {"const": "false", "title": "Never"} in schema["properties"]["fetchNews"]["oneOf"]


@pytest.mark.slow
def test_checkpoints_load_offline_with_transformers(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    for path in (DEFAULT_TARGET, DEFAULT_DRAFT):
        model = AutoModelForCausalLM.from_pretrained(path)
        tok = AutoTokenizer.from_pretrained(path)
        assert model.config.model_type == "llama" and tok.vocab_size == model.config.vocab_size
    target = AutoModelForCausalLM.from_pretrained(DEFAULT_TARGET).config
    assert target.num_attention_heads // target.num_key_value_heads >= 2  # grouped-query attention
    assert target.max_position_embeddings >= 512


def test_tokenizer_round_trips_training_text():
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(DEFAULT_TARGET / "tokenizer.json"))
    text = full_text()
    ids = tok.encode(text).ids
    assert len(ids) == len(text)  # one token per character
    assert tok.decode(ids) == text
    assert (DEFAULT_DRAFT / "tokenizer.json").read_bytes() == (DEFAULT_TARGET / "tokenizer.json").read_bytes()


def test_checkpoints_are_small_and_documented():
    total = sum(f.stat().st_size for f in CHECKPOINT_DIR.rglob("*") if f.is_file())
    assert total <= 10 * 2**20
    for path in (DEFAULT_TARGET, DEFAULT_DRAFT):
        card = (path / "README.md").read_text()
        assert "held-out loss" in card and "agreement" in card and "python -m minispec.training.train" in card


def test_import_minispec_does_not_import_transformers():
    import subprocess

    code = "import minispec, sys; from minispec import LLM; LLM; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}, check=True)
    assert out.stdout.strip() == "False"
