"""docs/fidelity.md is what tools/fidelity_page.py writes, and its hand-kept statuses name real twins."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import fidelity_page  # noqa: E402

from minispec.lab.records.twin_map import vllm_twins  # noqa: E402


def test_the_page_is_what_the_tool_writes():
    assert fidelity_page.PAGE.read_text() == fidelity_page.render(), "run python tools/fidelity_page.py"


def test_every_status_kept_by_hand_is_a_twin_s():
    twins = {t.module for t in vllm_twins() if t.vllm_path}
    assert set(fidelity_page.RUN) <= twins and set(fidelity_page.DEPARTURES) <= twins
    planted = dict(fidelity_page.RUN, **{"v1/worker/no_such.py": "run"})
    assert not set(planted) <= twins  # a module that is not a twin is caught


def test_a_twin_nothing_ran_says_so():
    row = next(line for line in fidelity_page.render().splitlines() if line.startswith("| `v1/sample/sampler.py`"))
    assert "read, not run" in row


def pointers(package: Path = ROOT / "minispec") -> dict[str, str]:
    """module -> the fidelity page its docstring sends the reader to, for every module that does."""
    import ast
    import re
    found = {}
    for path in sorted(package.rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if m := re.search(r"docs/fidelity/(\w+\.md)", doc):
            found[path.relative_to(package).as_posix()] = m.group(1)
    return found


def test_each_area_page_has_a_section_for_every_module_that_points_to_it():
    """Issue 33: the lines left the docstrings for a page per area; a docstring's pointer must
    land on a section of its own. Planted: a pointer to a page without the module's section."""
    sections = {name: set(modules) for name, _, modules in fidelity_page.area_pages()}
    assert len(sections) >= 7
    for module, page in pointers().items():
        assert module in sections[page], f"{module} points to docs/fidelity/{page}, which has no section for it"
    for modules in sections.values():
        assert all((ROOT / "minispec" / m).is_file() for m in modules), modules
    planted = {"v1/request.py": "scheduler.md"}
    assert any(m not in sections[p] for m, p in planted.items())


def test_the_site_lists_the_area_pages():
    text = fidelity_page.PAGE.read_text()
    for name, _, _ in fidelity_page.area_pages():
        assert f"](fidelity/{name})" in text
