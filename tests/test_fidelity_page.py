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
