"""Packaging: the two dependency lists agree, the checkpoints are what they claim."""

import os
import tomllib
from pathlib import Path

import yaml

from minispec.config import CHECKPOINT_DIR, DEFAULT_DRAFT, DEFAULT_TARGET
from minispec.training.corpus import full_text

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["dev"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = [p for p in pip if not p.startswith("-e")]
    assert sorted(listed) == sorted(declared)
    assert "-e .[dev]" in pip


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
    import sys

    code = "import minispec, sys; from minispec import LLM; LLM; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}, check=True)
    assert out.stdout.strip() == "False"
