"""vLLM's own code, on this machine, outside the repository.

Everything lives in one cache folder, ``$MINISPEC_VLLM_CACHE`` or
``${XDG_CACHE_HOME:-~/.cache}/minispec-vllm``, and is reused while its pins match:

* ``venv/``: vLLM's import dependencies, shared by both releases, pinned by
  ``constraints.txt`` (torch first, the CPU build, from ``$TORCH_INDEX`` if set);
* ``vllm-X/``: release X's Python sources only -- ``vllm/**/*.py`` out of its
  wheel, which pip downloads from PyPI and which is deleted once read -- plus
  the transformers that release needs (``constraints-vllm-X.txt``), since
  0.9.2 and 0.14.0 need different ones. ``python`` for a release puts that
  folder first on ``PYTHONPATH``. ``RELEASES`` are run by V1's check,
  ``V2_RELEASES`` by Model Runner V2's (``v2_run``), which imports no transformers;
* ``triton-X/``: for ``V2_RELEASES`` only, Triton's Python package and its one
  library (``triton/_C/libtriton.so``), out of its wheel, for the interpreter
  (``TRITON_INTERPRET=1``) that runs vLLM's V2 kernels on the CPU; the NVIDIA
  and AMD back ends stay in the discarded wheel.

Nothing is compiled: vLLM's compiled kernels (``vllm._C``) stay inside the
discarded wheel, and vLLM warns that it cannot import them, which none of the
code run here needs. vLLM twin: none.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

RELEASES = ("0.9.2", "0.14.0", "0.33.0")
V2_RELEASES = ("0.29.0", "0.30.0", "0.33.0")
TRITON = "3.9.0"
TRITON_FILES = ("triton/_C/libtriton.so",)  # beside triton/**/*.py
HERE = Path(__file__).parent
CONSTRAINTS = HERE / "constraints.txt"
# What the shared environment installs; constraints.txt pins them and everything they pull in.
TOP_LEVEL = ("numpy", "msgspec", "cachetools", "cloudpickle", "psutil", "pyzmq", "blake3", "pillow", "pybase64",
             "gguf", "py-cpuinfo", "aiohttp", "pydantic", "huggingface_hub", "safetensors", "regex", "pyyaml",
             "requests", "tqdm", "cbor2",
             # for 0.9.2's Scheduler (vllm/v1/spec_decode/metrics.py, vllm/entrypoints/openai/protocol.py)
             "prometheus_client", "fastapi", "openai")


def cache_dir() -> Path:
    explicit = os.environ.get("MINISPEC_VLLM_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "minispec-vllm"


def release_constraints(release: str) -> Path:
    if release not in RELEASES + V2_RELEASES:
        raise ValueError(f"release={release!r}: expected one of {RELEASES + V2_RELEASES}")
    return HERE / f"constraints-vllm-{release}.txt"


def _digest(*paths: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in paths)).hexdigest()


def _pinned(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _run(*cmd) -> None:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def venv_python() -> Path:
    return cache_dir() / "venv" / "bin" / "python"


def _venv_stamp() -> Path:
    return cache_dir() / "venv" / ".minispec-constraints"


def _release_stamp(release: str) -> tuple[Path, str]:
    return release_dir(release) / ".minispec-release", f"{release} {_digest(release_constraints(release))}"


def _is_current(stamp: Path, expected: str) -> bool:
    return stamp.exists() and stamp.read_text() == expected


def missing(releases=RELEASES) -> str | None:
    """Why the environment is not ready to run (None if it is); builds nothing."""
    if not _is_current(_venv_stamp(), _digest(CONSTRAINTS)):
        return f"no vLLM environment matching constraints.txt in {cache_dir()} (make vllm-check builds it)"
    stale = [r for r in releases if not _is_current(*_release_stamp(r))]
    if set(releases) & set(V2_RELEASES) and not _is_current(*_triton_stamp()):
        stale.append(f"Triton {TRITON}")
    return f"vLLM {', '.join(stale)} not in {cache_dir()} (make vllm-check fetches it)" if stale else None


def _ensure_venv(python: str) -> bool:
    venv, stamp = cache_dir() / "venv", _venv_stamp()
    if _is_current(stamp, _digest(CONSTRAINTS)):
        return False
    shutil.rmtree(venv, ignore_errors=True)
    _run(python, "-m", "venv", venv)
    pip = (venv_python(), "-m", "pip", "install", "--quiet", "--disable-pip-version-check")
    torch = next(p for p in _pinned(CONSTRAINTS) if p.startswith("torch=="))
    index = os.environ.get("TORCH_INDEX")
    _run(*pip, torch, *(("--index-url", index) if index else ()))
    _run(*pip, "-c", CONSTRAINTS, *TOP_LEVEL)
    stamp.write_text(_digest(CONSTRAINTS))
    return True


def release_dir(release: str) -> Path:
    return cache_dir() / f"vllm-{release}"


def _extract_sources(wheel: Path, into: Path, package: str, extra=()) -> int:
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.startswith(f"{package}/") and n.endswith(".py") or n in extra]
        z.extractall(into, names)
    return len(names)


def pip_download(python: str, requirement: str, into: str, *options: str, env=None) -> subprocess.CompletedProcess:
    """``pip download --no-deps`` of ``requirement`` into ``into``; the caller reads the result."""
    return subprocess.run([python, "-m", "pip", "download", "--quiet", "--no-deps", *options, requirement, "-d", into],
                          capture_output=True, text=True, env=env)


def fetch_wheel_sources(requirement: str, into: Path, package: str, extra=(), python: str | None = None) -> Path:
    """``requirement``'s wheel (no dependencies; a name and version, or a wheel's path),
    downloaded by ``python``'s pip (the environment's unless given) into a temporary folder in
    the cache; only ``package``'s Python files and ``extra`` are kept, in ``into``, and the
    wheel is deleted once read. Every fetch of sources goes through here: the environment's
    releases and Triton, ``sources.release_sources``, ``more_sources.sglang_sources``."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as download:
        done = pip_download(python or str(venv_python()), requirement, download, "--only-binary=:all:")
        wheels = sorted(Path(download).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(f"could not download {requirement}'s wheel ({done.returncode}):\n{done.stderr[-2000:]}")
        into.mkdir(parents=True, exist_ok=True)
        _extract_sources(wheels[0], into, package, extra)
    return into


def cached_or_fetched(cached: Path | None, folder: Path, fetch, stamp: str, label: str) -> Path:
    """``cached`` if it is there; else ``fetch(folder)``, then ``folder/stamp`` written with
    ``label`` (only once the fetch succeeded, so a failed one is fetched again next time)."""
    if cached is not None:
        return cached
    fetch(folder)
    (folder / stamp).write_text(label)
    return folder


def _replace_with_sources(requirement: str, into: Path, package: str, extra=()) -> None:
    shutil.rmtree(into, ignore_errors=True)
    fetch_wheel_sources(requirement, into, package, extra)


def _ensure_release(release: str) -> bool:
    folder, pins = release_dir(release), release_constraints(release)
    stamp, expected = _release_stamp(release)
    if _is_current(stamp, expected):
        return False
    # with its METADATA, since vLLM asks importlib.metadata for its own version
    # (0.30.0 vllm/triton_utils/importing.py 38, vllm/platforms/__init__.py 25)
    _replace_with_sources(f"vllm=={release}", folder, "vllm", (f"vllm-{release}.dist-info/METADATA",))
    if _pinned(pins):
        _run(venv_python(), "-m", "pip", "install", "--quiet", "--no-deps", "--target", folder, *_pinned(pins))
    stamp.write_text(expected)
    return True


def triton_dir() -> Path:
    return cache_dir() / f"triton-{TRITON}"


def _triton_stamp() -> tuple[Path, str]:
    return triton_dir() / ".minispec-triton", f"{TRITON} {' '.join(TRITON_FILES)}"


def _ensure_triton() -> bool:
    stamp, expected = _triton_stamp()
    if _is_current(stamp, expected):
        return False
    _replace_with_sources(f"triton=={TRITON}", triton_dir(), "triton", TRITON_FILES)
    stamp.write_text(expected)
    return True


@dataclass(frozen=True)
class Readiness:
    seconds: float
    built: list[str]  # what had to be (re)built: "venv", "vllm-0.9.2", ...
    size_bytes: int


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def ensure(releases=RELEASES + V2_RELEASES, python: str | None = None) -> Readiness:
    """Build what is missing or out of date; say what it took. The environment's
    Python is ``python``, else python3.11 (what the pins were resolved with, and
    a Python both releases support), else this one."""
    python = python or shutil.which("python3.11") or sys.executable
    start = time.monotonic()
    cache_dir().mkdir(parents=True, exist_ok=True)
    built = ["venv"] if _ensure_venv(python) else []
    built += [f"vllm-{r}" for r in dict.fromkeys(releases) if _ensure_release(r)]
    if set(releases) & set(V2_RELEASES) and _ensure_triton():
        built.append(f"triton-{TRITON}")
    return Readiness(time.monotonic() - start, built, folder_size(cache_dir()))


def release_env(release: str) -> dict[str, str]:
    """The environment a subprocess of ``release`` runs with. A V2 release also
    gets Triton, run by its interpreter; vLLM keeps Triton only where it sees an
    active GPU driver or an empty ``CUDA_VISIBLE_DEVICES`` (a distributed
    worker before CUDA starts: 0.30.0 ``vllm/triton_utils/importing.py`` 52-78),
    so the latter is set."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(release_dir(release)), VLLM_LOGGING_LEVEL="WARNING", OMP_NUM_THREADS="1")
    if release in V2_RELEASES:
        env.update(PYTHONPATH=f"{release_dir(release)}{os.pathsep}{triton_dir()}", TRITON_INTERPRET="1",
                   CUDA_VISIBLE_DEVICES="", VLLM_TARGET_DEVICE="cpu")
    return env


def run_worker(release: str, worker: Path, payload: dict) -> dict:
    """``python worker JOBS RESULTS`` in ``release``'s environment: ``payload``
    goes in as JOBS (JSON), and what the worker wrote to RESULTS comes back."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs_path, results_path = Path(tmp, "jobs.json"), Path(tmp, "results.json")
        jobs_path.write_text(json.dumps(payload))
        done = subprocess.run([str(venv_python()), str(worker), str(jobs_path), str(results_path)],
                              env=release_env(release), capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"vLLM {release}'s {worker.name} failed ({done.returncode}):\n{done.stderr[-4000:]}")
        return json.loads(results_path.read_text())
