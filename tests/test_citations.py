"""Citations of vLLM release source: the parser (every form the repository uses), the checks
against a release's files, and the repository's own citations against the cached releases
(reference/citations.py, tools/cite_check.py; ``make cite-check``)."""

import sys
from pathlib import Path

import pytest

from reference.citations import Block, Citation, Verdict, check, find_citations
from reference.sources import cached_sources

ROOT = Path(__file__).resolve().parents[1]
PP_UTILS = "vllm/v1/worker/gpu/pp_utils.py"
RELEASE_FILES = {
    "0.30.0": frozenset({PP_UTILS, "vllm/v1/worker/gpu/model_runner.py", "vllm/v1/worker/gpu_model_runner.py",
                         "vllm/v1/core/sched/scheduler.py", "vllm/config/vllm.py"}),
    "0.9.2": frozenset({"vllm/v1/worker/gpu_model_runner.py", "vllm/v1/core/sched/scheduler.py",
                        "vllm/core/scheduler.py"}),
}


def files(release):
    return RELEASE_FILES.get(release)


def parse(text):
    return find_citations(Block("t.md", text, 1), files)


def test_the_canonical_form():
    (c,), unparsed = parse("vLLM 0.30.0 `vllm/v1/worker/gpu/pp_utils.py` 144-154")
    assert c == Citation("t.md:1", "0.30.0", PP_UTILS, ((144, 154),)) and not unparsed


def test_the_variants_the_repository_uses():
    (a, b), _ = parse("the fix in vLLM 0.30.0: vllm/v1/worker/gpu/pp_utils.py 163-178 (broadcast_drafts), 144-154 "
                      "(drafts restored with the sampled tokens), 79-82")
    assert (a.ranges, a.symbol) == (((163, 178),), "broadcast_drafts")  # a lone name after a range: its symbol
    assert (b.ranges, b.symbol) == (((144, 154), (79, 82)), None)
    (c,), _ = parse("vLLM v0.9.2, `vllm/v1/worker/gpu_model_runner.py`, `_update_states`, lines 480–488:")
    assert (c.release, c.symbol, c.ranges) == ("0.9.2", "_update_states", ((480, 488),))
    found, _ = parse("(0.9.2 ``gpu_model_runner.py`` lines 1515-1532, 0.30.0 lines 2839-2865)")
    assert {(c.release, c.ranges) for c in found} == {("0.9.2", ((1515, 1532),)), ("0.30.0", ((2839, 2865),))}
    (d,), _ = parse('(vLLM 0.30.0, `vllm/config/vllm.py` 590–596: *"Async scheduling is not yet supported"*)')
    assert d.quote == "Async scheduling is not yet supported"


def test_a_base_name_and_a_bare_line_take_the_file_named_before_them():
    text = "vLLM 0.30.0's `vllm/v1/worker/gpu/pp_utils.py` broadcasts (lines 19-24), then `model_runner.py` 2016-2024"
    found, unparsed = parse(text)
    assert sorted((c.path, c.ranges) for c in found) == [("vllm/v1/worker/gpu/model_runner.py", ((2016, 2024),)),
                                                          (PP_UTILS, ((19, 24),))] and not unparsed


def test_a_table_row_cites_its_file_in_brackets():
    (c, d), _ = parse("| 0.9.2 | `vllm/v1/worker/gpu_model_runner.py` | `_update_states` (480–494), the draft write "
                      "(533–543) |")
    assert (c.symbol, c.ranges, d.symbol, d.ranges) == ("_update_states", ((480, 494),), None, ((533, 543),))


def test_what_cannot_be_read_is_listed_not_guessed():
    _, unparsed = parse("the scheduler (lines 10-12)")
    assert [u.why for u in unparsed] == ["a line number with no file before it"]
    _, unparsed = parse("vLLM 0.9.2 `scheduler.py` 230-235")  # two scheduler.py in 0.9.2
    assert "names no one file" in unparsed[0].why
    _, unparsed = parse("vLLM 0.5.0 `vllm/x.py` 1-2")
    assert "not available" in unparsed[0].why


@pytest.fixture
def release(tmp_path):
    body = ["import torch", "", "class PPHandler:", "    def broadcast(self, tokens):",
            "        # -1 pads, as", "        send = torch.nn.functional.pad(", "            tokens, (0, 3)",
            "        )", "        return send"]
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "pp.py").write_text("\n".join(body) + "\n")
    return tmp_path


def cite(ranges, **kw):
    return Citation("t", "0.30.0", "vllm/pp.py", ranges, **kw)


def test_a_citation_holds_or_says_what_drifted(release):
    assert check(cite(((6, 8),)), release) is Verdict.OK
    assert check(Citation("t", "0.30.0", "vllm/gone.py", ((1, 1),)), release) is Verdict.NO_FILE
    assert check(cite(((8, 10),)), release) is Verdict.NO_LINES
    assert check(cite(((6, 8),), symbol="PPHandler.broadcast"), release) is Verdict.OK  # the def around them
    assert check(cite(((6, 8),), symbol="receive"), release) is Verdict.NO_SYMBOL
    assert check(cite(((5, 7),), quote="-1 pads, as ... nn.functional.pad("), release) is Verdict.OK
    assert check(cite(((6, 8),), quote="pads with -1"), release) is Verdict.NO_QUOTE
    shown = ("send = torch.nn.functional.pad(", "tokens, (0, 3)", ")")
    assert check(cite(((6, 8),), code=shown), release) is Verdict.OK
    assert check(cite(((6, 7),), code=shown), release) is Verdict.NO_CODE  # one line short: the block drifted
    assert check(cite(((5, 8),), code=(")", "tokens, (0, 3)")), release) is Verdict.NO_CODE  # out of order


def test_the_code_a_citation_introduces_is_checked_with_it():
    text = "`vllm/v1/worker/gpu/pp_utils.py`, vLLM 0.30.0, lines 257–269 (from reading it):\n\n```python\na = 1\n...\nb\n```"
    (c,), _ = parse(text)
    assert c.code == ("a = 1", "b")


def test_a_release_must_look_like_one():
    with pytest.raises(ValueError, match="release='latest'"):
        cached_sources("latest")


def test_every_citation_in_the_repository_holds_in_the_cached_releases():
    """make cite-check, offline: where a release is not cached its citations are listed as
    unparsed ("not available") and this test checks the rest."""
    if cached_sources("0.30.0") is None:
        pytest.skip("vLLM's sources are not cached here (make cite-check fetches them)")
    sys.path.insert(0, str(ROOT / "tools"))
    import cite_check

    results, unparsed = cite_check.survey(offline=True)
    assert [f"{c.where}: {c.label}: {v.value}" for c, v in results if v is not Verdict.OK] == []
    assert [u for u in unparsed if "not available" not in u.why] == []
    assert len(results) > 150
