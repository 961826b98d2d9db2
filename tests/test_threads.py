"""The one table of cited GitHub threads (minispec/lab/records/threads.json, built by threads.py): every reference anywhere in
the repository is in it, every entry is cited somewhere, every date and quoted sentence next to a reference in
prose is the table's, and the presets and the timeline draw from it."""

import ast
import io
import json
import re
import subprocess
import tokenize
from datetime import date
from pathlib import Path

import pytest

from minispec.lab.faults.catalogue import FAULTS
from minispec.lab.faults.pp_sync import DESIGNS, TIMELINE, State
from minispec.lab.records.threads import (
    REFERENCE,
    THREADS,
    VLLM,
    Citation,
    Post,
    PostKind,
    Thread,
    ThreadKind,
    ThreadState,
    Verified,
    load_threads,
    references,
    thread,
)

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".py", ".md", ".ipynb", ".txt", ".rst", ".cfg", ".toml")
NOT_READ = ("tests/test_threads.py",)  # its made-up references below
TABLE = "minispec/lab/records/threads.json"  # the entries (threads.py builds them)


def tracked_text() -> dict[str, str]:
    """Every tracked text file the references may be in, as stored."""
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return {name: (ROOT / name).read_text(encoding="utf-8") for name in names
            if name.endswith(SUFFIXES) and name not in NOT_READ and (ROOT / name).is_file()}


def repository_text() -> dict[str, str]:
    texts = {}
    for name, text in tracked_text().items():
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
    assert missing == {}, "cited but not in minispec/lab/records/threads.json"


def test_every_entry_is_cited_somewhere_and_listed_once():
    cited = set().union(*(references(text) for text in repository_text().values()))
    keys = [(t.repo, t.number) for t in THREADS]
    assert len(keys) == len(set(keys))
    assert [k for k in keys if k not in cited] == []


def test_each_entry_says_how_it_is_known():
    for t in THREADS:
        if t.verified in (Verified.SEARCHED, Verified.PARTLY, Verified.TITLE):
            assert t.title and t.state is not ThreadState.NOT_READ, t
        if t.verified in (Verified.SEARCHED, Verified.PARTLY):
            assert t.posted and date(2025, 1, 1) <= t.posted, t
        if t.quotes:
            assert t.verified in (Verified.SEARCHED, Verified.PARTLY), t  # nothing is quoted from a thread not read
        if t.verified in (Verified.PARTLY, Verified.CITED_IN_SOURCE):
            assert t.note, t  # what could not be settled, or where the code was read
    assert thread(VLLM, 50514).url == "https://github.com/vllm-project/vllm/pull/50514"
    assert thread("sgl-project/sglang", 30775).label == "sglang #30775"
    assert thread(VLLM, 44697).name == "vLLM RFC #44697" and thread("vllm-project/vllm-ascend", 15171).name == \
        "vllm-ascend PR #15171"
    with pytest.raises(KeyError, match="vllm-project/vllm#1 is cited but not in"):
        thread(VLLM, 1)
    with pytest.raises(ValueError, match="its title and a post are expected"):
        Thread(VLLM, 2, ThreadKind.PULL, "", ThreadState.OPEN, Verified.SEARCHED)
    with pytest.raises(ValueError, match="earliest first"):
        Thread(VLLM, 2, ThreadKind.PULL, "t", ThreadState.OPEN, Verified.SEARCHED,
               (Post(PostKind.REVIEW, date(2026, 2, 2)), Post(PostKind.DESCRIPTION, date(2026, 1, 1))))


def test_a_citation_can_only_cite_a_post_and_a_quote_the_table_holds():
    t = thread(VLLM, 46994)
    c = Citation(t, date(2026, 9, 1), "does not negotiate element counts", "reported there")
    assert c.render() == ('vLLM PR #46994 (merged; its comment of 2026-09-01: "does not negotiate element counts"): '
                          "reported there")
    assert Citation(thread(VLLM, 44698)).render() == "vLLM PR #44698 (open)"
    with pytest.raises(KeyError, match="no post of 2026-09-02"):
        Citation(t, date(2026, 9, 2))
    with pytest.raises(KeyError, match="has no quote containing 'NCCL hangs'"):
        Citation(t, date(2026, 9, 1), "NCCL hangs")
    with pytest.raises(ValueError, match="needs the post it is from"):
        Citation(t, quote="NCCL does not negotiate element counts")


def test_the_presets_and_the_timeline_draw_their_references_from_the_table():
    for fault in FAULTS.values():
        assert fault.citations and all(c.thread in THREADS for c in fault.citations), fault.preset
        assert fault.reference == "; ".join(c.render() for c in fault.citations)
    for milestone in TIMELINE:
        assert all(t in THREADS for t in milestone.refs), milestone.what
        first = milestone.refs[0]
        assert milestone.state is (State.MERGED if first.state is ThreadState.MERGED else State.OPEN)
        assert first.posted is None or milestone.when <= first.posted, (milestone.when, first.label)
    for design in DESIGNS:
        assert design.ref in THREADS


# -- dates and quotes next to a reference in prose --------------------------------------------
# A reference's words run from it to the next reference, a paragraph or table-cell break, a list
# item, or a release number (what follows a release number is quoted from its source, not the thread).
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
QUOTE = re.compile(r'(?<![\w`])["“](?![\s)`])([^"”]{10,400}?)["”]')
WORDS_END = re.compile(r"\n\n|\||\n[-*] |\bv?\d+\.\d+\.\d+\b")


def prose(name: str, text: str) -> str:
    """The words of a file: a notebook's cell sources (its outputs are rendered from checked code, and nbval
    compares them), a Python file's strings and comments (its code is not prose), any other file whole."""
    if name.endswith(".ipynb"):
        return "\n\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
    if not name.endswith(".py"):
        return text
    parts = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            parts.append("\n" + tok.string.lstrip("# ") + "\n")
        elif tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):  # an f-string
                value = "\n\n"
            parts.append(value if isinstance(value, str) else "\n\n")
        elif tok.type == tokenize.OP and tok.string in ",)":
            parts.append("\n\n")  # one argument's words end there
    return "".join(parts)


def _normal(text: str) -> str:
    return " ".join(text.replace("\\", "").split())  # markdown's escapes and line wraps


def disagreements(text: str) -> list[str]:
    """Each date or quoted sentence next to a reference that the table does not hold for that thread."""
    found = []
    matches = list(REFERENCE.finditer(text))
    for i, m in enumerate(matches):
        stop = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        words = text[m.end():min(stop, m.end() + 400)]
        words = words[:end.start()] if (end := WORDS_END.search(words)) else words
        (key,) = references(m.group(0))
        try:
            t = thread(*key)
        except KeyError:
            continue  # test_every_reference_in_the_repository_is_in_the_table names it
        dates = {str(p.posted) for p in t.posts}
        found += [f"{t.label}: a post of {d}" for d in DATE.findall(words) if d not in dates]
        held = [_normal(q) for q in t.quotes + (t.title,)]
        found += [f"{t.label}: {_normal(q)!r}" for q in QUOTE.findall(words)
                  if len(q.split()) >= 3 and not any(_normal(q) in h for h in held)]
    return found


def test_a_date_or_quote_the_table_does_not_hold_is_named():
    text = ('PR #46994 (its comment of 2026-09-01: "NCCL does not negotiate element counts"); '
            'PR #50514 (opened 2026-07-30: "broadcast the sampled tokens twice"). '
            'RFC #44697 says "There\'s one invariant behind all of it", and its title is '
            '"[RFC]: MTP speculative decoding under pipeline parallelism (PP>1)".\n\n'
            'PR #20291 changed it; v0.9.2\'s comment says "When using PP, the scheduler sends the tokens".')
    assert disagreements(text) == ["#50514: a post of 2026-07-30", "#50514: 'broadcast the sampled tokens twice'"]


def test_every_date_and_quote_next_to_a_reference_is_the_tables():
    found = {}
    for name, text in tracked_text().items():
        if name != TABLE and name.endswith((".py", ".md", ".ipynb", ".rst")):
            if problems := disagreements(prose(name, text)):
                found[name] = problems
    assert found == {}, "not in minispec/lab/records/threads.json: add the post or quote, or correct it"


def test_the_table_is_data_and_a_malformed_entry_is_named(tmp_path):
    """Issue 33: the entries left the package's Python for threads.json; each is built and checked
    as it loads. Planted: an unknown state, a missing title, a post out of order."""
    rows = json.loads((ROOT / TABLE).read_text(encoding="utf-8"))
    assert len(rows) == len(THREADS) and THREADS[0].number == rows[0]["number"]
    path = tmp_path / "threads.json"
    for i, broken in ((0, {"state": "REOPENED"}), (3, {"title": None}), (0, {"posts": [
            {"kind": "REVIEW", "posted": "2026-02-02"}, {"kind": "DESCRIPTION", "posted": "2026-01-01"}]})):
        planted = [dict(r) for r in rows]
        planted[i] = {k: v for k, v in {**planted[i], **broken}.items() if v is not None}
        path.write_text(json.dumps(planted))
        with pytest.raises(ValueError, match=rf"threads.json entry {i} \(vllm-project/vllm#{rows[i]['number']}\)"):
            load_threads(path)
    path.write_text(json.dumps(rows))
    assert load_threads(path) == THREADS
