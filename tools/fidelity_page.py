"""Write docs/fidelity.md: each twin, the vLLM release and file it mirrors, and how faithful it is known to be.

The twins come from the modules' docstrings (``minispec.lab.records.twin_map``, as the twin
table). What is known of each is kept here, in ``RUN`` (the twins ``make vllm-check`` runs
against vLLM's own code, with the counts of the last recorded run and where that run is
written up) and ``DEPARTURES`` (where minispec differs from a release on purpose, and why);
every other twin is "read, not run", with the "Left out:" sentence of its docstring. The page ends
with the list of the hand-written pages in ``docs/fidelity/``, one per area, with the modules each
covers (read from their module headings).
``tests/test_fidelity_page.py`` checks that the page is current and that every module named
here is a twin.

    python tools/fidelity_page.py          # rewrite docs/fidelity.md
    python tools/fidelity_page.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import re
import sys

from generated import ROOT, command

sys.path.insert(0, str(ROOT))

from minispec.lab.records.twin_map import vllm_twins  # noqa: E402

PAGE = ROOT / "docs" / "fidelity.md"
AREAS = ROOT / "docs" / "fidelity"  # a page per area, by hand: the lines, history and pull requests
MODULE_HEADING = re.compile(r"^## `([\w/]+\.py)`", re.M)  # "## `v1/core/sched/scheduler.py`"
CHECKED = "[Checked against vLLM's own code](checked_against_vllm.md)"

# module -> what running vLLM's own code on minispec's schedules showed (make vllm-check)
RUN = {
    "v1/worker/gpu_input_batch.py": (
        "run: `InputBatch` equal, buffer by buffer, with 0.9.2 (preset `vllm-0.9.2`; thread and 200 random "
        "schedules, 6291/6291 stage-steps) and 0.14.0 (`vllm-0.14`; 5602/5602), as recorded in " + CHECKED
        + "; with 0.33.0 (`vllm-0.14`): {v1_033}"),
    "v1/worker/gpu_model_runner.py": (
        "run: `_update_states` as for `InputBatch` (same runs); 0.33.0's `_update_states` is 0.30.0's, line for "
        "line (from reading the code), and with 0.33.0: {v1_033}"),
    "v1/worker/block_table.py": "run: its rows are compared with `InputBatch`'s in the same runs",
    "v1/core/sched/scheduler.py": (
        "run against 0.9.2's own `Scheduler`: 170/200 random runs equal; every difference is a departure its "
        "docstring names (" + CHECKED + ")"),
    "v1/core/kv_cache_manager.py": "run under 0.9.2's `Scheduler` check: block ids agree (vLLM's are minispec's plus one)",
    "v1/worker/gpu/states.py": (
        "run: the slots equal 0.30.0's on the thread and 200 random schedules (preset `fixed`, 5255/5255 "
        "stage-steps, " + CHECKED + "); with 0.33.0: {v2_033}"),
    "v1/worker/gpu/pp_utils.py": "run with `states.py` (the same runs): {v2_033_short}",
    "v1/worker/gpu/input_batch.py": "run with `states.py` (`post_update`, under Triton's interpreter): {v2_033_short}",
    "v1/worker/gpu/model_runner.py": "run with `states.py` (its slot methods, compiled from vLLM's file): {v2_033_short}",
}

# module -> a departure from vLLM on purpose, and why
DEPARTURES = {
    "v1/worker/pp_prev_sampled.py": (
        "departs: sends every sampled token (`[num_reqs, k + 1]`), the counts and the next drafts, where every "
        "release asserts width 1 (0.29.0 `vllm/v1/worker/gpu_model_runner.py` 4918-4919; 0.30.0 4856-4858; "
        "0.33.0 4534-4536, and 0.33.0 still receives `[num_reqs, 1]` at 4550): V1 under PP + async has no "
        "speculative decoding in any release, and a non-last stage needs all three (vLLM #57755)"),
    "v1/worker/gpu/pp_utils.py": (
        "departs from 0.33.0: its sampled-token broadcast is always `k + 1` wide (0.30.0's padding); 0.33.0 sends "
        "width 1 for a batch without drafts and `k + 1` otherwise, sizing both ends from the batch "
        "(0.33.0 `vllm/v1/worker/gpu/pp_utils.py` 104-106); the drafts restore in 0.33.0's `post_update` "
        "kernel instead of `get_prev_sampled_outputs` (0.33.0 `vllm/v1/worker/gpu/input_batch.py`, "
        "`post_update`): the slots come out the same"),
}

RESULTS = {  # python -m reference --release 0.33.0 --random 20 --random-v2 20, 2026-12-07, 2 shared cores
    "v1_033": (
        "the thread equal (58/58 stage-steps); random schedules differ where PR #41133 acts (9/20 runs equal, "
        "467/523 stage-steps; first difference seed 0, step 16, stage 0, `token_ids_cpu`): 0.33.0 writes the "
        "relayed tokens from `num_tokens_no_spec` on (0.33.0 `vllm/v1/worker/gpu_model_runner.py` 1459-1479) "
        "where 0.14.0 rewrote them from `num_computed_tokens` (0.14.0 1048-1054), and minispec leaves #41133 "
        "out (the `LEFT_OUT` of `minispec/lab/faults/catalogue.py`)"),
    "v2_033": (
        "equal: the thread 34/34 and 20 random schedules 472/472 stage-steps (preset `fixed`); `v2-stale-drafts` "
        "and `v2-broadcast-width` differ from it at step 2 of the thread, as from 0.30.0"),
    "v2_033_short": "0.33.0 equal on the same 21 schedules",
}


def status(module: str, left_out: str | None) -> str:
    said = [RUN[module].format(**RESULTS)] if module in RUN else []
    said += [DEPARTURES[module]] if module in DEPARTURES else []
    if not said:
        said = ["read, not run" + (f". Left out: {left_out}" if left_out else "")]
    return "; ".join(said).replace("|", "\\|")


def area_pages() -> list[tuple[str, str, list[str]]]:
    """Each area's page: its file name, its title (its first heading, less "Fidelity: "), and the
    modules its sections are about (a section per module, headed by the module's path)."""
    pages = []
    for path in sorted(AREAS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = text.splitlines()[0].removeprefix("# ").removeprefix("Fidelity: ")
        pages.append((path.name, title, MODULE_HEADING.findall(text)))
    return pages


def render_areas() -> list[str]:
    rows = [f"- [{title[:1].upper() + title[1:]}](fidelity/{name}): " + ", ".join(f"`{m}`" for m in modules)
            for name, title, modules in area_pages()]
    return ["## Line by line, area by area", "",
            "What each module's docstring leaves to the website: the release lines behind each rule, the "
            "release history and the pull requests, a page per area. `make cite-check` reads these pages as it "
            "reads code, so every citation on them is checked against its release and its pin.", "", *rows, ""]


def render() -> str:
    rows = [f"| `{t.module}` | {t.release} | `{t.vllm_path}` | {status(t.module, t.left_out)} |"
            for t in vllm_twins() if t.vllm_path]
    return "\n".join([
        "# How faithful each twin is",
        "",
        "<!-- tools/fidelity_page.py writes this page from the modules' docstrings and its own RUN and "
        "DEPARTURES; edit those -->",
        "",
        "Each module of minispec that mirrors a vLLM file, the release it mirrors, and what is known of how "
        "faithfully: **run** where `make vllm-check` runs vLLM's own code on minispec's schedules and compares "
        "buffer by buffer (" + CHECKED + "), **departs** where minispec differs from a release on purpose, "
        "**read, not run** where the twin was written from reading the release's code and nothing ran it "
        "against vLLM.",
        "",
        "| minispec module | vLLM release | vLLM file | status |",
        "|---|---|---|---|",
        *rows,
        "",
        *render_areas(),
    ])


def main(argv=None) -> int:
    return command(PAGE, render, "tools/fidelity_page.py", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
