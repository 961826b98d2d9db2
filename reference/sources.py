"""vLLM releases' Python sources, for reading only: what ``make cite-check`` checks citations against.

A release's sources live where ``environment`` keeps them, ``cache_dir()/vllm-X/vllm/**.py``,
so the two share one download: a folder ``make vllm-check`` built is read as it is, and one
fetched here (sources only, stamped ``.minispec-sources``) is rebuilt by ``make vllm-check``
with the transformers it also needs. Fetching is ``pip download --no-deps`` of the release's
wheel (the sdist cannot be downloaded without building vLLM), of which only
``vllm/**/*.py`` is kept; the wheel is deleted once read.

``vllm_files`` lists a cached release's files, so that the tests can check each twin
``minispec.lab.records.twin_map`` reads from a docstring against the release it names.

vLLM twin: none (minispec's own tooling).
"""

from __future__ import annotations

import os
import re
import sys
import zipfile
from pathlib import Path

from reference.environment import cache_dir, cached_or_fetched, fetch_wheel_sources, release_dir

STAMP = ".minispec-sources"
RELEASE = re.compile(r"^0\.\d+\.\d+$")


def _check_release(release: str) -> None:
    if not RELEASE.match(release):
        raise ValueError(f"release={release!r}: expected a vLLM release number such as '0.30.0'")


def cached_sources(release: str) -> Path | None:
    """The folder holding release's ``vllm/`` package, if it is cached here; builds nothing."""
    _check_release(release)
    folder = release_dir(release)
    return folder if (folder / "vllm" / "__init__.py").is_file() else None


def release_sources(release: str, python: str = sys.executable) -> Path:
    """The folder holding release's ``vllm/`` package, fetched first if it is not cached."""
    return cached_or_fetched(cached_sources(release), release_dir(release),
                             lambda folder: fetch_wheel_sources(f"vllm=={release}", folder, "vllm", python=python),
                             STAMP, release)


def vllm_files(release: str) -> frozenset[str] | None:
    """Every file path of vLLM ``release`` ("vllm/v1/request.py", ...), if it is cached
    here, else None: the sources ``make vllm-check`` keeps
    (``environment``), or under any folder in
    ``$MINISPEC_VLLM_SOURCES`` (``os.pathsep``-separated) a whole ``vllm-X/vllm`` or
    ``vllm-X/src/vllm`` tree (one with its ``__init__.py``) or a ``vllm-X/vllm-X-*.whl``."""
    roots = [Path(p) for p in os.environ.get("MINISPEC_VLLM_SOURCES", "").split(os.pathsep) if p] + [cache_dir()]
    for folder in (root / f"vllm-{release}" for root in roots):
        for tree in (folder, folder / "src"):
            if (tree / "vllm" / "__init__.py").is_file():
                return frozenset(f.relative_to(tree).as_posix() for f in (tree / "vllm").rglob("*") if f.is_file())
        for wheel in sorted(folder.glob(f"vllm-{release}-*.whl")):
            with zipfile.ZipFile(wheel) as z:
                return frozenset(n for n in z.namelist() if n.startswith("vllm/"))
    return None


def in_release(files: frozenset[str], path: str) -> bool:
    """A file of the release, or a package of it (``vllm/platforms``)."""
    return path in files or any(f.startswith(path.rstrip("/") + "/") for f in files)
