"""The nbval sanitize file masks what changes between runs, and nothing a lesson checks."""

import re
import tomllib
from pathlib import Path

from nbval.plugin import get_sanitize_patterns

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "tests" / "nbval_sanitize.cfg"


def sanitize(text: str) -> str:
    for regex, replace in get_sanitize_patterns(CFG.read_text()):
        text = re.sub(regex, replace, text)
    return text


def test_pytest_uses_the_sanitize_file():
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"]
    assert f"--nbval-sanitize-with {CFG.relative_to(ROOT).as_posix()}" in addopts


def test_times_addresses_and_temporary_paths_are_masked():
    assert sanitize("256 tokens in 4.36 s") == "256 tokens in <DURATION>"
    assert sanitize("took 812 ms, then 3 seconds") == "took <DURATION>, then <DURATION>"
    assert sanitize("<Figure at 0x7f3a2c1b9d90>") == "<Figure at <ADDRESS>>"
    assert sanitize("saved /tmp/tmpab12cd/step2.png here") == "saved <TMP> here"


def test_what_the_lessons_check_is_left_alone():
    lines = [
        "step 2: A decode +4 drafts [ st]; B decode +4 drafts [s t]",
        "    row 0 A re-added computed=10  no_spec=11  history=[A list is a] draft slots=[tem]",
        "vllm-0.9.2                       2.4%     1.07       32  1/4 (A@12)",
        "1 stage, drafts k=3      2.40      2.89         63%  'is a sequence types that'",
        "2 stages, 3 steps, 0x1 = 1",
    ]
    assert [sanitize(line) for line in lines] == lines
