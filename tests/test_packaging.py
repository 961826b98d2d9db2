"""Packaging: the two dependency lists agree, the checkpoints are what they claim."""

import re
import sys
import tomllib
from pathlib import Path

import yaml

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
    assert names(EXTRAS["dev"]) - {"minispec"} == {"pytest", "pyyaml", "nbval", "hypothesis", "playwright",
                                                    "markdown-it-py", "ruff", "pytest-xdist"}


def test_license_is_an_spdx_string_and_the_pythons_are_declared():
    assert PROJECT["license"] == "Apache-2.0"  # a table makes setuptools print pages of warnings
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert backend == ["setuptools>=77"]  # the first setuptools that reads an SPDX string
    versions = {c.rsplit(" :: ", 1)[1] for c in PROJECT["classifiers"] if c.startswith("Programming Language")}
    assert versions == {"3.11", "3.12", "3.13"} and PROJECT["requires-python"] == ">=3.11"


def test_the_notebook_folder_holds_only_notebooks():
    """What JupyterLab's file browser shows there (it hides dot-files and __pycache__)."""
    shown = [p for p in (ROOT / "notebooks").iterdir() if not p.name.startswith(".") and p.name != "__pycache__"]
    assert {p.suffix for p in shown} == {".ipynb"}


def test_jupyterlab_settings_turn_the_news_off_and_free_closed_kernels():
    """`make lab` copies them into JupyterLab's overrides.json; each key must exist in the
    installed JupyterLab's own schema, with a value it allows, or JupyterLab ignores it."""
    import json

    overrides = json.loads((ROOT / "tools" / "jupyterlab" / "overrides.json").read_text())
    assert overrides == {
        "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension:tracker": {"kernelShutdown": True},  # closing a notebook frees its kernel
    }
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    for plugin, settings in overrides.items():
        package, name = plugin.split(":")
        properties = json.loads((schemas / package / f"{name}.json").read_text())["properties"]
        for key, value in settings.items():
            allowed = [choice["const"] for choice in properties[key].get("oneOf", [])]
            assert value in allowed if allowed else isinstance(value, bool), (plugin, key)


def test_the_prose_links_only_to_known_hosts():
    """No package registry is named by its host in the README or the guides (say "PyPI",
    "PyTorch's CPU index"): every address written there is on this short list."""
    allowed = {"discuss.vllm.ai", "github.com"}
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    hosts = {m for page in pages for m in re.findall(r"\b[a-z][a-z0-9+.-]*://([^/\s)\"'>]+)", page.read_text())}
    assert hosts <= allowed, hosts - allowed
