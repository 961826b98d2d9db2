"""The wheel holds what runs without a checkout, and runs from itself alone (``tools/wheel_scope.py``).

``pyproject.toml`` lists the notebooks' support, which ``setup.py`` leaves out of the wheel; the list
must be exactly what the import graph leaves: a module listed but imported by the wheel would break
it, one imported by nothing the wheel runs would be weight it carries for nobody. The slow test
builds the wheel from a clean copy of the checkout and runs its entry points with nothing else of
minispec on the path (no editable install, no checkout).
"""

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import package_size  # noqa: E402
import wheel_scope  # noqa: E402

# A package small enough to work by hand: an engine module imports the lab's ``plot`` through the
# viz part's surface, inside a function; ``plots`` imports ``palette`` relatively; ``widgets`` is
# exported by the surface but imported by nothing the wheel runs.
TOY = {
    "minispec/__init__.py": "",
    "minispec/v1/__init__.py": "",
    "minispec/v1/engine.py": "def draw():\n    from minispec.lab.viz import plot\n    return plot\n",
    "minispec/lab/__init__.py": "",
    "minispec/lab/surface.py": "",
    "minispec/lab/viz/__init__.py": '_SURFACE = {"plots": ("plot",), "widgets": ("stepper",)}\n',
    "minispec/lab/viz/plots.py": "from . import palette\n",
    "minispec/lab/viz/palette.py": "",
    "minispec/lab/viz/widgets.py": "",
}


def test_the_graph_follows_surfaces_relative_imports_and_imports_inside_functions():
    assert wheel_scope.notebook_only(TOY) == ["minispec/lab/viz/widgets.py"]


def test_a_wrong_list_is_named_both_ways():
    assert wheel_scope.differences(TOY, ["minispec/lab/viz/widgets.py"]) == []
    assert wheel_scope.differences(TOY, []) == [
        "minispec/lab/viz/widgets.py: nothing the wheel runs imports it: list it as notebook-only "
        "(python tools/wheel_scope.py)"]
    wrong = wheel_scope.differences(TOY, ["minispec/lab/viz/*"])
    assert [line.split(":")[0] for line in wrong] == [
        "minispec/lab/viz/__init__.py", "minispec/lab/viz/palette.py", "minispec/lab/viz/plots.py"]


def test_pyprojects_list_is_what_the_import_graph_leaves():
    files = wheel_scope.package_files()
    assert wheel_scope.differences(files, wheel_scope.declared((ROOT / "pyproject.toml").read_text())) == []


def test_the_check_catches_the_wheel_importing_a_notebook_only_module():
    """Planted on the real package: ``minispec demo`` reaching for the stepper, a notebook's widget."""
    files = wheel_scope.package_files()
    demo = "minispec/entrypoints/cli/demo.py"
    files[demo] += "\n\ndef _planted():\n    from minispec.lab.viz import thread_runs\n    return thread_runs\n"
    found = wheel_scope.differences(files, wheel_scope.declared((ROOT / "pyproject.toml").read_text()))
    assert "minispec/lab/viz/stepper.py: listed as notebook-only, but the wheel imports it: take it off the list" in found


def test_a_surface_name_the_wheel_left_out_says_where_it_is(tmp_path, monkeypatch):
    part = tmp_path / "toy_part"
    part.mkdir()
    (part / "__init__.py").write_text("from minispec.lab.surface import lazy_surface\n"
                                      "__all__, __getattr__, __dir__ = lazy_surface(__name__, {'gone': ('thing',)})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import toy_part

    with pytest.raises(ImportError, match=r"thing comes from toy_part\.gone, which serves the notebooks .* `make lab`"):
        toy_part.thing  # noqa: B018


def _clean_copy(dest: Path) -> Path:
    """The checkout's tracked and new files, without build folders a setuptools build would reuse."""
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for name in names:
        if name and (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes((ROOT / name).read_bytes())
    return dest


def _alone(unpacked: Path):
    """Run ``python -S`` with the wheel and the environment's third-party packages on the path, and no
    ``.pth`` file read: the editable install's finder (which maps the checkout) never loads."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(unpacked), sysconfig.get_paths()["purelib"]]),
           "OMP_NUM_THREADS": "1"}

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-S", *args], cwd=unpacked, env=env, capture_output=True,
                              text=True, timeout=600, check=check)
    return run


@pytest.mark.slow
def test_the_wheel_holds_the_counted_files_and_runs_alone(tmp_path):
    source = _clean_copy(tmp_path / "source")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(tmp_path / "dist"),
                    str(source)], check=True, capture_output=True, timeout=600)
    wheel = next((tmp_path / "dist").glob("minispec-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        held = sorted(n for n in z.namelist() if n.endswith(".py"))
        z.extractall(tmp_path / "unpacked")
    counted = package_size.wheel_files([p for p in wheel_scope.package_files()], (ROOT / "pyproject.toml").read_text())
    assert held == counted
    run = _alone(tmp_path / "unpacked")
    modules = [wheel_scope.module_name(p) for p in held]
    where = run("-c", "import importlib, sys, minispec\n"
                f"for m in {modules!r}: importlib.import_module(m)\n"
                "print(minispec.__file__)").stdout
    assert where.startswith(str(tmp_path / "unpacked"))
    assert "tokens per target forward" in run("-m", "minispec", "generate", "The for statement ", "--pp", "2",
                                              "--max-tokens", "8").stdout
    assert "invariant violations: 0" in run("-m", "minispec", "replay", "--fixes", "all", "--steps", "3").stdout
    found = run("-m", "minispec", "explore", "--fixes", "vllm-0.9.2", "--pp", "2", "--async-scheduling", "off",
                "--then-search", "0").stdout
    assert "invariant" in found and "nothing breaks" not in found
    assert "set-up check passed" in run("-m", "minispec", "check", "--out", str(tmp_path / "figures")).stdout
    left_out = run("-c", "from minispec.lab.viz import trace_stepper", check=False)
    assert left_out.returncode == 1 and "ships with them in the checkout, not in the wheel" in left_out.stderr
