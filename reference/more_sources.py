"""What ``make cite-check`` reads besides a vLLM release's wheel: the release's own tests
(from its sdist) and SGLang's released sources (from its wheel).

vLLM's wheel holds only ``vllm/``; a citation of ``tests/v1/...`` is read in the release's
sdist. ``pip download`` of vLLM's sdist prepares its metadata, which needs vLLM's build
tools and fails here; with ``--no-clean`` the unpacked sdist stays in pip's build folder
all the same, and only its ``tests/**/*.py`` are kept, beside the release's ``vllm/``
(``cache_dir()/vllm-X/tests``). SGLang's citations name ``python/sglang/...`` as in its
repository; its wheel's ``sglang/**/*.py`` are kept under ``cache_dir()/sglang-X/python/``
so the cited path is the path on disk. A release key for SGLang is ``"sglang-X"``.

vLLM twin: none (minispec's own tooling).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from reference.environment import _extract_sources, cache_dir, release_dir

SGLANG = re.compile(r"^sglang-(0\.\d+\.\d+)$")
TESTS_STAMP = ".minispec-tests"


def _pip_download(python: str, requirement: str, into: str, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "pip", "download", "--quiet", "--no-deps", *options, requirement, "-d", into],
                          capture_output=True, text=True)


def sglang_dir(release: str) -> Path:
    m = SGLANG.match(release)
    if not m:
        raise ValueError(f"release={release!r}: expected 'sglang-' and an SGLang release number, e.g. 'sglang-0.5.23'")
    return cache_dir() / release


def cached_sglang(release: str) -> Path | None:
    folder = sglang_dir(release)
    return folder if (folder / "python" / "sglang" / "__init__.py").is_file() else None


def sglang_sources(release: str, python: str = sys.executable) -> Path:
    """The folder whose ``python/sglang/`` is SGLang ``release``'s package, fetched if not cached."""
    cached = cached_sglang(release)
    if cached is not None:
        return cached
    folder = sglang_dir(release)
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as download:
        done = _pip_download(python, f"sglang=={SGLANG.match(release).group(1)}", download, "--only-binary=:all:")
        wheels = sorted(Path(download).glob("sglang-*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(f"could not download {release}'s wheel ({done.returncode}):\n{done.stderr[-2000:]}")
        _extract_sources(wheels[0], folder / "python", "sglang")
    return folder


def cached_tests(release: str) -> Path | None:
    folder = release_dir(release)
    return folder if (folder / TESTS_STAMP).is_file() else None


def release_tests(release: str, python: str = sys.executable) -> Path:
    """The folder whose ``tests/`` are vLLM ``release``'s tests (from its sdist), fetched if not cached."""
    cached = cached_tests(release)
    if cached is not None:
        return cached
    folder = release_dir(release)
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as work:
        build = Path(work, "build")
        build.mkdir()
        # pip unpacks the sdist, then fails to prepare its metadata; --no-clean keeps what it unpacked
        done = subprocess.run([python, "-m", "pip", "download", "--quiet", "--no-deps", "--no-clean",
                               "--no-build-isolation", "--no-binary=:all:", f"vllm=={release}", "-d", work],
                              capture_output=True, text=True, env={**os.environ, "TMPDIR": str(build)})
        trees = [t.parent for t in build.glob("pip-*/*/pyproject.toml") if (t.parent / "tests").is_dir()]
        tarballs = sorted(Path(work).glob(f"vllm-{release}.tar.gz"))
        if tarballs:
            shutil.unpack_archive(tarballs[0], build / "sdist")
            trees = [t for t in (build / "sdist").iterdir() if (t / "tests").is_dir()]
        if len(trees) != 1:
            raise RuntimeError(f"could not read vLLM {release}'s sdist ({done.returncode}):\n{done.stderr[-2000:]}")
        shutil.rmtree(folder / "tests", ignore_errors=True)
        for source in (trees[0] / "tests").rglob("*.py"):
            target = folder / source.relative_to(trees[0])
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    (folder / TESTS_STAMP).write_text(release)
    return folder

