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
import sys
import tempfile
from pathlib import Path

from reference.environment import cache_dir, cached_or_fetched, fetch_wheel_sources, pip_download, release_dir

SGLANG = re.compile(r"^sglang-(0\.\d+\.\d+)$")
TESTS_STAMP = ".minispec-tests"
SGLANG_STAMP = ".minispec-sglang"


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
    folder = sglang_dir(release)  # the release named as expected, else a ValueError
    requirement = f"sglang=={SGLANG.match(release).group(1)}"
    return cached_or_fetched(cached_sglang(release), folder,
                             lambda into: fetch_wheel_sources(requirement, into / "python", "sglang", python=python),
                             SGLANG_STAMP, release)


def cached_tests(release: str) -> Path | None:
    folder = release_dir(release)
    return folder if (folder / TESTS_STAMP).is_file() else None


def release_tests(release: str, python: str = sys.executable) -> Path:
    """The folder whose ``tests/`` are vLLM ``release``'s tests (from its sdist), fetched if not cached."""
    return cached_or_fetched(cached_tests(release), release_dir(release),
                             lambda folder: _fetch_sdist_tests(release, folder, python), TESTS_STAMP, release)


def _fetch_sdist_tests(release: str, folder: Path, python: str) -> None:
    """vLLM ``release``'s sdist unpacked in a temporary folder; its ``tests/**/*.py`` copied into ``folder``."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as work:
        build = Path(work, "build")
        build.mkdir()
        # pip unpacks the sdist, then fails to prepare its metadata; --no-clean keeps what it unpacked
        done = pip_download(python, f"vllm=={release}", work, "--no-clean", "--no-build-isolation",
                            "--no-binary=:all:", env={**os.environ, "TMPDIR": str(build)})
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
