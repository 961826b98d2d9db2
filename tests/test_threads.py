"""The one table of cited GitHub threads (minispec/lab/vllm_reference/threads.py): every reference anywhere in
the repository is in it, every entry is cited somewhere, and the timeline agrees with it."""

import json
import subprocess
from datetime import date
from pathlib import Path

import pytest

from minispec.lab.faults.pp_sync import DESIGNS, TIMELINE, State
from minispec.lab.vllm_reference.threads import (
    THREADS,
    VLLM,
    Thread,
    ThreadKind,
    ThreadState,
    Verified,
    references,
    thread,
)

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".py", ".md", ".ipynb", ".txt", ".rst", ".cfg", ".toml")
NOT_READ = ("tests/test_threads.py",)  # its made-up references below


def repository_text() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = {}
    for name in names:
        if not name.endswith(SUFFIXES) or name in NOT_READ or not (ROOT / name).is_file():
            continue
        text = (ROOT / name).read_text(encoding="utf-8")
        if name.endswith(".ipynb"):  # sources and what they print
            cells = json.loads(text)["cells"]
            text = "\n".join("".join(c["source"]) + "".join(
                "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                for o in c.get("outputs", [])) for c in cells)
        texts[name] = text
    return texts


def test_the_forms_a_reference_takes():
    text = ("PR #52295 and RFC #44697; sglang #30775, vllm-ascend PR #15171, JupyterLab issue #15207, "
            "vllm-project/vllm#18019, https://github.com/vllm-project/vllm/pull/13339; not colours "
            "\"#999999\", #0072B2 or #000")
    assert references(text) == {(VLLM, 52295), (VLLM, 44697), ("sgl-project/sglang", 30775),
                                ("vllm-project/vllm-ascend", 15171), ("jupyterlab/jupyterlab", 15207),
                                (VLLM, 18019), (VLLM, 13339)}


def test_every_reference_in_the_repository_is_in_the_table():
    missing = {}
    for name, text in repository_text().items():
        for repo, number in references(text):
            try:
                thread(repo, number)
            except KeyError:
                missing.setdefault(f"{repo}#{number}", []).append(name)
    assert missing == {}, "cited but not in minispec/lab/vllm_reference/threads.py THREADS"


def test_every_entry_is_cited_somewhere_and_listed_once():
    cited = set().union(*(references(text) for text in repository_text().values()))
    keys = [(t.repo, t.number) for t in THREADS]
    assert len(keys) == len(set(keys))
    assert [k for k in keys if k not in cited] == []


def test_each_entry_says_how_it_is_known():
    for t in THREADS:
        if t.verified in (Verified.INDEX, Verified.TITLE):
            assert t.title and t.state is not ThreadState.NOT_READ, t
        if t.verified is Verified.INDEX:
            assert t.posted and date(2025, 1, 1) <= t.posted, t
        if t.quote:
            assert t.verified is Verified.INDEX, t  # nothing is quoted from a thread not read
    assert thread(VLLM, 50514).url == "https://github.com/vllm-project/vllm/pull/50514"
    assert thread("sgl-project/sglang", 30775).label == "sglang #30775"
    with pytest.raises(KeyError, match="vllm-project/vllm#1 is cited but not in"):
        thread(VLLM, 1)
    with pytest.raises(ValueError, match="title and date are expected"):
        Thread(VLLM, 2, ThreadKind.PULL, "", None, ThreadState.OPEN, "", Verified.INDEX)


def test_the_timeline_and_the_designs_agree_with_the_table():
    for milestone in TIMELINE:
        for ref in milestone.refs:
            t = thread(ref.repo, ref.number)
            assert ref.kind == t.kind.value, ref
            assert (t.state is ThreadState.MERGED) == (milestone.state is State.MERGED), (milestone.what, t)
            assert t.posted is None or milestone.when <= t.posted, (milestone.when, t)  # its first post, or earlier
    for design in DESIGNS:
        assert thread(design.ref.repo, design.ref.number).kind.value == design.ref.kind
