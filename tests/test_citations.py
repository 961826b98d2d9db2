"""Citations of vLLM release source: the parser (every form the repository uses), the checks
against a release's files, and the repository's own citations against the cached releases
(reference/citations.py, tools/cite_check.py; ``make cite-check``)."""

import os
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


def _cite_check():
    sys.path.insert(0, str(ROOT / "tools"))
    import cite_check

    return cite_check


def _cached_or_skip(*releases):
    """Skip where the releases are not cached here, unless the run requires them (CI:
    MINISPEC_REQUIRE_CITES=1, after make cite-check fetched them), where that fails."""
    missing = [r for r in releases if cached_sources(r) is None]
    if missing and os.environ.get("MINISPEC_REQUIRE_CITES"):
        pytest.fail(f"vLLM {', '.join(missing)} not cached, and MINISPEC_REQUIRE_CITES is set (make cite-check)")
    if missing:
        pytest.skip(f"vLLM {', '.join(missing)} not cached here (make cite-check fetches them)")


def test_every_citation_in_the_repository_holds_and_is_pinned():
    """make cite-check, offline: every mention of lines read, every citation holding and
    pinned, no pin unused (the releases must be cached: see _cached_or_skip)."""
    _cached_or_skip("0.9.2", "0.14.0", "0.29.0", "0.30.0", "0.33.0")
    cite_check = _cite_check()
    found = cite_check.survey(offline=True)
    assert [f"{c.where}: {c.label}: {v.value}" for c, v in found.results if v is not Verdict.OK] == []
    assert found.unparsed == [] and found.stale == []
    assert len(found.results) > 300
    # issue 33: the fidelity pages and the threads table's notes are read as code is
    where = {c.where.split(":")[0].split(" entry ")[0] for c, _ in found.results}
    assert {"docs/fidelity/scheduler.md", "docs/fidelity/model_runner_v1.md", "docs/fidelity/model_runner_v2.md",
            "docs/fidelity/relay.md", "docs/fidelity/engine_and_executors.md", "docs/fidelity/designs.md",
            "docs/fidelity/spec_decode.md", "minispec/lab/records/threads.json"} <= where


def test_a_bare_range_after_a_file_is_read_as_that_file_s():
    """pp_prev_sampled.py's docstring names the file once and then gives ranges bare (once skipped
    without a word): each is a citation of the file named last, in the release named since."""
    text = ("vLLM 0.30.0: `vllm/v1/worker/gpu_model_runner.py`, ``_pp_broadcast`` 4849-4864 and ``_pp_receive`` "
            "4866-4896.\n\nIt is called at 4612-4615 (``_prepare_input_ids``, 1807-1810); the same assertion in "
            "0.9.2 at 4918-4919. Seeds 2025-2026 are years, not lines.")
    found, unparsed = parse(text)
    assert sorted((c.release, c.ranges, c.symbol) for c in found) == [
        ("0.30.0", ((1807, 1810),), "_prepare_input_ids"), ("0.30.0", ((4612, 4615),), None),
        ("0.30.0", ((4849, 4864),), "_pp_broadcast"), ("0.30.0", ((4866, 4896),), "_pp_receive"),
        ("0.9.2", ((4918, 4919),), None)] and not unparsed
    _, unparsed = parse("vLLM 0.5.0 `vllm/x.py` is the file; see 10-12.")  # a release not to be had
    assert [u.why for u in unparsed] == ["vLLM 0.5.0 not available"]
    _, unparsed = parse("vLLM 0.30.0 `vllm/gone.py` is the file; see 10-12.")  # a path the release lacks
    assert [u.why for u in unparsed] == ["vllm/gone.py is not a file of vLLM 0.30.0"]
    found, unparsed = parse("`minispec/v1/worker/x.py` 10-12, then 20-30")  # minispec's own lines: not checked
    assert found == [] and unparsed == []


def test_a_quote_is_code_never_the_gap_between_joined_strings(release):
    """catalogue.py's strings ("... 163-178 " "next ...") once gave the whitespace between them as the quote."""
    text = 'vLLM 0.30.0 vllm/v1/worker/gpu/pp_utils.py 163-178 "\n        "(more prose)"'
    (c,), _ = parse(text)
    assert c.quote is None
    assert check(cite(((6, 8),), quote=", \n   "), release) is Verdict.NOT_CODE


def test_a_named_symbol_must_hold_the_whole_range(release):
    """The def around the lines, parsed with ast: a range that runs past its end is not inside it."""
    source = release / "vllm" / "pp.py"
    source.write_text(source.read_text() + "\n    def receive(self):\n        return None\n")
    assert check(cite(((5, 9),), symbol="broadcast"), release) is Verdict.OK
    assert check(cite(((8, 12),), symbol="broadcast"), release) is Verdict.NO_SYMBOL  # runs into receive
    assert check(cite(((8, 12),), symbol="PPHandler"), release) is Verdict.OK  # the class holds them


def test_a_range_moved_inside_its_function_fails_its_pin(release):
    from reference import pins

    source = release / "vllm" / "pp.py"
    lines = source.read_text().splitlines()
    pinned = {("0.30.0", "vllm/pp.py", 5, 7): pins.pin(source, lines, 5, 7)}
    assert pinned[("0.30.0", "vllm/pp.py", 5, 7)].symbol == "PPHandler.broadcast"
    assert check(cite(((5, 7),)), release, pinned) is Verdict.OK
    assert check(cite(((6, 8),)), release, pinned) is Verdict.NOT_PINNED  # moved one line, still inside
    moved = {("0.30.0", "vllm/pp.py", 6, 8): pinned[("0.30.0", "vllm/pp.py", 5, 7)]}  # its row moved with it
    assert check(cite(((6, 8),)), release, moved) is Verdict.PIN_CHANGED
    around = {("0.30.0", "vllm/pp.py", 5, 7): pins.Pin("PPHandler", pinned[("0.30.0", "vllm/pp.py", 5, 7)].digest)}
    assert check(cite(((5, 7),)), release, around) is Verdict.PIN_SYMBOL


MOVES = [  # issue 35: each once passed make cite-check, moved by 10 lines inside its function
    # (issue 33 moved pp_prev_sampled.py's docstring citations to its fidelity page: planted there)
    ("docs/fidelity/model_runner_v1.md", "4849-4864", "4859-4874", "0.30.0"),
    ("minispec/lab/faults/catalogue.py", "1590-1611", "1600-1621", "0.30.0"),
    ("minispec/lab/faults/in_flight.py", "589-599", "599-609", "0.30.0"),
    ("docs/fidelity/model_runner_v1.md", "4612-4615", "4622-4625", "0.30.0"),
    ("docs/fidelity/scheduler.md", "616-631", "626-641", "0.30.0"),
    ("docs/fidelity/relay.md", "561-566", "571-576", "sglang-0.5.23"),
    ("minispec/lab/records/threads.json", "1061-1063", "1071-1073", "0.14.0"),
]


@pytest.mark.parametrize("name, was, moved, release_number", MOVES, ids=[m[1] for m in MOVES])
def test_the_repository_s_ranges_moved_by_ten_lines_fail(tmp_path, name, was, moved, release_number):
    """Planted in a copy of the file that cites it: checked against the real release and the
    real pin table, the moved range fails (and the file's other citations still hold)."""
    if release_number.startswith("sglang-"):
        from reference.more_sources import cached_sglang
        if cached_sglang(release_number) is None:
            pytest.skip(f"{release_number} not cached here (make cite-check fetches it)")
    else:
        _cached_or_skip(release_number)
    cite_check = _cite_check()
    text = (ROOT / name).read_text()
    assert text.count(was) >= 1
    planted = tmp_path / Path(name).name
    planted.write_text(text.replace(was, moved, 1))
    found = cite_check.survey(offline=True, paths=[planted])
    failing = [(c.ranges, v) for c, v in found.results if v is not Verdict.OK]
    start, end = (int(n) for n in moved.split("-"))
    assert failing and all((start, end) in ranges for ranges, _ in failing), failing
    assert cite_check.main(["--offline"], paths=[planted]) == 1
    planted.write_text(text)
    assert cite_check.main(["--offline"], paths=[planted]) == 0


def test_an_unreachable_release_fails_the_run_and_offline_counts_it(tmp_path, monkeypatch, capsys):
    """Fail closed: with no cache and no index to fetch from, the run fails; --offline
    passes, saying how many it skipped."""
    cite_check = _cite_check()
    monkeypatch.setenv("MINISPEC_VLLM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    planted = tmp_path / "cites.md"
    planted.write_text("# A\n\nvLLM 0.30.0 `vllm/v1/worker/gpu/pp_utils.py` 144-154\n")
    assert cite_check.main([], paths=[planted]) == 1
    out = capsys.readouterr().out
    assert "FAIL vLLM 0.30.0: could not download" in out and "checked 0" in out and "skipped 1" in out
    assert cite_check.main(["--offline"], paths=[planted]) == 0
    assert "--offline: 1 citations skipped (0.30.0 not cached)" in capsys.readouterr().out
