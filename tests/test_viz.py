"""Renderers are pure functions of trace records: check what they show.

Expectations are worked by hand from the thread's scenario (``lab.experiments.scenarios``):
at step 2 batch_0 = {A, B} comes round again and both are re-added, A into row
0 which C ("The for statement ...") just left, B into row 1 which D left.
"""

import pytest
from matplotlib.figure import Figure

from minispec.instruments.invariants import check_trace
from minispec.instruments.trace import ScheduleRecord, StepRecord, Trace
from minispec.lab.experiments.metrics import (
    acceptance_per_step,
    alpha_estimate,
    expected_tokens_per_forward,
    first_divergence,
)
from minispec.lab.viz.legible import SMALL
from minispec.lab.viz.plots import (
    fit_label,
    plot_acceptance,
    plot_presets,
    plot_stage_rows,
    plot_step_rows,
    plot_strip_diff,
)
from minispec.lab.viz.stepper import move, nearest_stop, stepper_view, stop_position, stops, thread_runs
from minispec.lab.viz.strip import diff_cells, stage_view
from minispec.lab.viz.text import output_step, render_comparison, render_event, render_step


@pytest.fixture(scope="module")
def runs():
    return thread_runs(max_tokens=8)


def row(runs, preset, req_id, step=2, stage=0):
    return next(r for r in stage_view(runs[preset].trace.step(step), stage) if r.req_id == req_id)


def text(decode, cells_or_ids):
    return "".join(decode(getattr(c, "token", c)) for c in cells_or_ids)


def drafts(view):
    return [c for c in view.cells if c.role.startswith("draft")]


def test_recorder_keeps_previous_occupant(runs, decode):
    trace = runs["vllm-0.9.2"].trace
    a = trace.step(2).stages[0].row_of("A")
    assert (a.row, a.prev_req_id) == (0, "C")
    assert text(decode, a.prev_token_ids[11:14]) == "tem"  # "The for sta|tem|ent": C's prompt at A's draft slots
    assert [r.prev_req_id for r in trace.step(0).stages[0].rows] == [None, None]  # rows never used before


def test_row_strip_under_the_bug(runs, decode):
    a, b = row(runs, "vllm-0.9.2", "A"), row(runs, "vllm-0.9.2", "B")
    assert a.label == "row 0: A (re-added)" and a.prev_req_id == "C" and a.status == "drafts stale"
    assert text(decode, drafts(a)) == "tem" and text(decode, a.scheduled) == " st"
    assert [c.pos for c in drafts(a)] == [11, 12, 13]
    assert [c.role for c in drafts(a)] == ["draft stale"] * 3
    assert [c.left_by for c in drafts(a)] == ["C"] * 3
    assert (a.cells[-4].pos, decode(a.cells[-4].token), a.cells[-4].role) == (10, "a", "computed now")
    assert text(decode, drafts(b)) == "e r" and text(decode, b.scheduled) == "s t" and b.prev_req_id == "D"
    # the middle space equals the scheduled draft by chance: the row is still stale
    assert [c.role for c in drafts(b)] == ["draft stale", "draft by chance", "draft stale"]


def test_row_strip_with_both_fixes(runs, decode):
    for req_id, scheduled in (("A", " st"), ("B", "s t")):
        view = row(runs, "all", req_id)
        assert text(decode, drafts(view)) == scheduled == text(decode, view.scheduled)
        assert [c.role for c in drafts(view)] == ["draft ok"] * 3 and view.status == "ok"
        assert all(c.left_by is None for c in view.cells)


def test_history_window_is_cut_with_an_ellipsis(runs, decode):
    a, b = row(runs, "vllm-0.9.2", "A"), row(runs, "vllm-0.9.2", "B")
    assert (a.cells[0].pos, a.cut) == (0, False)  # A's 14 positions all fit
    assert (b.cells[0].pos, b.cut) == (2, True)  # "St" of "Strings" is cut
    out = render_step(runs["vllm-0.9.2"].trace.step(2), decode)
    assert "history=[A list is a]" in out and "history=[…trings are a]" in out
    assert "draft slots=[tem] scheduled=[ st]  STALE (row held C before)" in out


def test_fault_two_marks_stage_zero_history(runs):
    """Under vllm-0.14 the first violation is stage 0's history (fault 2); the strip
    marks exactly the cells that differ from the request's tokens, and stage 1's
    copy of the same request is right."""
    trace = runs["vllm-0.14"].trace
    first = check_trace(trace)[0]
    assert (first.invariant, first.stage) == (3, 0)
    step = trace.step(first.step)
    view = row(runs, "vllm-0.14", first.req_id, first.step, 0)
    truth = step.schedule.all_token_ids[first.req_id]
    record = step.stages[0].row_of(first.req_id)
    first_draft = record.num_computed_tokens + record.num_scheduled_tokens - record.num_drafts
    differ = [c.pos for c in view.cells if c.pos < first_draft and record.token_ids[c.pos] != truth[c.pos]]
    assert differ and [c.pos for c in view.cells if c.role == "wrong history"] == differ
    assert view.wrong_history and "history wrong" in view.status
    assert not row(runs, "vllm-0.14", first.req_id, first.step, 1).wrong_history


def test_shifted_draft_is_told_from_a_leftover(runs, decode):
    """vllm-0.14, step 4, stage 0: A's history is two tokens short (fault 2), so
    fix 1 wrote the drafts "cti" at 12..14 while the step gathers drafts at
    14..16. Slot 14 holds the third draft, shifted; 15 and 16 hold what C left."""
    step = runs["vllm-0.14"].trace.step(4)
    a = row(runs, "vllm-0.14", "A", 4, 0)
    assert text(decode, a.scheduled) == "cti" and a.prev_req_id == "C"
    assert [(c.pos, decode(c.token), c.role, c.left_by) for c in drafts(a)] == [
        (14, "i", "draft shifted", None), (15, "n", "draft stale", "C"), (16, "t", "draft stale", "C")]
    assert a.status == "history wrong, drafts shifted, drafts stale"
    assert "draft shifted" not in {c.role for c in row(runs, "vllm-0.14", "A", 4, 1).cells}
    out = render_step(step, decode)
    assert "draft slots=[int] scheduled=[cti]  1 SHIFTED, 2 STALE (row held C before)" in out
    fig = plot_stage_rows(step, 0, decode, name="vllm-0.14")
    assert [t.get_text() for t in fig.axes[0].texts].count("↔") == 1
    assert fig.axes[0].get_title(loc="left").startswith("vllm-0.14: step 4 · stage 0")
    assert "↔ draft slot holds a scheduled draft, shifted" in [t.get_text() for t in fig.legends[0].get_texts()]
    # fault 1 alone leaves no shifted draft, and its legend does not list one
    buggy = plot_stage_rows(runs["vllm-0.9.2"].trace.step(2), 0, decode)
    assert not any("shifted" in t.get_text() for t in buggy.legends[0].get_texts())


def test_output_step_names_the_step_that_emitted_a_token(runs, decode):
    """With both fixes A emits "a" at its prefill (step 0), then " se" at step 2
    (two drafts accepted, one recovered token): outputs 1 to 3."""
    trace = runs["all"].trace
    assert text(decode, trace.outputs["A"][:4]) == "a se"
    assert [output_step(trace, "A", i) for i in range(4)] == [0, 2, 2, 2]
    assert output_step(trace, "A", 4) > 2
    with pytest.raises(ValueError, match="index=8"):
        output_step(trace, "A", len(trace.outputs["A"]))


def test_diff_marks_exactly_the_differing_cells(runs):
    buggy, fixed = (stage_view(runs[p].trace.step(2), 0) for p in ("vllm-0.9.2", "all"))
    # A: tem vs " st" all differ; B: "e r" vs "s t" differ but for the space
    assert diff_cells(buggy, fixed) == {("A", 11), ("A", 12), ("A", 13), ("B", 13), ("B", 15)}
    assert diff_cells(fixed, fixed) == set()
    fig = plot_strip_diff({"vllm-0.9.2": runs["vllm-0.9.2"].trace.step(2), "all": runs["all"].trace.step(2)}, 0)
    outlined = [p for ax in fig.axes for p in ax.patches if p.get_linewidth() > 2]
    assert len(outlined) == 2 * 5  # each differing cell, in both strips
    assert "5 cells differ (outlined)" in [t.get_text() for t in fig.axes[0].texts]
    with pytest.raises(ValueError, match="steps: expected the same step"):
        plot_strip_diff({"a": runs["all"].trace.step(2), "b": runs["all"].trace.step(3)}, 0)


def test_labels_fit_their_cells(runs):
    assert fit_label("<unk>") == ("unk", SMALL) and fit_label(" ")[0] == "␣" and fit_label("\n")[0] == "⏎"
    assert fit_label("statement")[0] == "sta…"
    for token, shown in (("<unk>", "unk"), ("statement", "sta…")):  # four characters are the widest
        fig = plot_stage_rows(runs["vllm-0.9.2"].trace.step(2), 0, decode=lambda t, token=token: token)
        fig.canvas.draw()
        ax = fig.axes[0]
        cell_px = ax.transData.transform((0.92, 0))[0] - ax.transData.transform((0, 0))[0]
        labels = [t for t in ax.texts if t.get_text() == shown]
        assert labels and all(t.get_window_extent().width < cell_px for t in labels)


def test_row_strip_figure(runs, visible_decode):
    decode = visible_decode
    fig = plot_step_rows(runs["vllm-0.9.2"].trace.step(2), decode, selected=0, max_rows=3, ncols=16)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "row 0: A (re-added)" in texts and "row held C before" in texts and "␣" in texts
    assert texts.count("✗") == 5 and texts.count("≈") == 1 and texts.count("C") == 3
    assert fig.axes[0].get_title(loc="left").startswith("▶ step 2 · stage 0")
    fixed = plot_step_rows(runs["all"].trace.step(0), decode, max_rows=3, ncols=16)
    assert tuple(fixed.get_size_inches()) == tuple(fig.get_size_inches())  # steppers need a fixed size


def test_acceptance_against_the_formula():
    assert expected_tokens_per_forward(0.5, 3) == pytest.approx(1.875)  # 1 + .5 + .25 + .125
    assert expected_tokens_per_forward(1.0, 3) == 4 and expected_tokens_per_forward(0.0, 3) == 1
    schedule = ScheduleRecord(5, {"X": 4, "Y": 4}, {"X": [1, 2, 3], "Y": [4, 5, 6]}, {}, {}, {}, [], {})
    trace = Trace("all", 2, [StepRecord(schedule, num_accepted={"X": 3, "Y": 1})])
    assert acceptance_per_step(trace) == [(5, 6, 4, 2)]
    assert alpha_estimate(trace) == (pytest.approx(4 / 5), 3)  # 4 accepted, one rejection (Y's second)
    fig = plot_acceptance({"k=3": trace})
    assert fig.axes[1].get_lines()[0].get_ydata()[0] == pytest.approx(1 + 4 / 2)
    assert fig.axes[1].get_lines()[1].get_ydata()[0] == pytest.approx(expected_tokens_per_forward(0.8, 3))
    assert fig.axes[1].get_lines()[0].get_label() == "k=3: per step (mean 3.00)"  # (4 accepted + 2) / 2


def test_acceptance_length_is_weighted_by_verifications_and_formula_lines_differ_by_style():
    steps = [StepRecord(ScheduleRecord(s, {"X": 4}, {"X": [1, 2, 3]}, {}, {}, {}, [], {}), num_accepted={"X": n})
             for s, n in ((0, 3), (1, 0))]
    wide = StepRecord(ScheduleRecord(2, {"X": 4, "Y": 4, "Z": 4}, {r: [1, 2, 3] for r in "XYZ"}, {}, {}, {}, [], {}),
                      num_accepted={"X": 0, "Y": 0, "Z": 0})
    fig = plot_acceptance({"a": Trace("all", 1, steps + [wide]), "b": Trace("all", 1, steps)})
    lines = fig.axes[1].get_lines()
    # 3 accepted over 5 verifications: 1.60, not the mean of the steps' 4, 1, 1 (2.00)
    assert lines[0].get_label() == "a: per step (mean 1.60)"
    assert lines[1].get_linestyle() != lines[3].get_linestyle()  # the two formula lines
    assert lines[1].get_marker() != lines[3].get_marker() and lines[1].get_markerfacecolor() == "white"


def test_plot_presets(runs):
    lines = plot_presets({p: r.trace for p, r in runs.items()}).axes[0].get_lines()
    assert [line.get_label().split(" ")[0] for line in lines] == ["vllm-0.9.2", "vllm-0.14", "all"]


def test_stepper_state(runs, decode):
    trace = runs["all"].trace
    assert stops(trace)[:5] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]
    view = stepper_view(runs, "vllm-0.9.2", 2, 0, decode)
    assert view.label == "vllm-0.9.2 · step 2 · stage 0 · batch_0 = {A, B}"
    assert view.highlight == (2, 0) and view.index == 4
    n = len(stops(runs["vllm-0.9.2"].trace))  # every step through both stages: the fifth stop is step 2
    assert view.position == f"event 5 of {n} ({n // 2} steps × 2 stages)"
    assert stop_position([(0, 0), (0, 1), (1, 1)], 2) == "event 3 of 3"  # not a full grid: no product
    assert "A decode +4 drafts [ st]" in view.text and "invariant 2 (draft agreement)" in view.text
    assert "no invariant violated at step 2, stage 0" in stepper_view(runs, "all", 2, 0, decode).text
    # a violation found at several positions of one row is one line (it printed twice at 30 stops)
    last = stepper_view(runs, "vllm-0.9.2", 2, 1, decode).text.splitlines()
    assert "invariant 2 (draft agreement) violated at step 2, stage 1, request A (see the strip)" in last
    assert len(last) == len(set(last)), last
    assert stepper_view(runs, "all", 3, 1).label == "all · step 3 · stage 1 (last) · batch_1 = {C, D}"
    last = max(s.step for s in trace.steps)
    assert nearest_stop(trace, 999, 0) == (last, 0)  # a shorter run clamps
    assert move(trace, 2, 1, +1) == (3, 0) and move(trace, 0, 0, -1) == (0, 0)
    with pytest.raises(ValueError, match="preset='nope'"):
        stepper_view(runs, "nope", 0, 0)


@pytest.mark.slow
def test_stepper_widget(runs, decode):
    from minispec.lab.viz.widgets import TraceStepper, trace_stepper

    stepper = TraceStepper(runs, decode)
    assert "vllm-0.9.2 · step 0 · stage 0 · batch_0 = {A, B}" in stepper.label.value
    strip, gantt = stepper.strip.value, stepper.gantt.value
    for _ in range(4):
        stepper.next.click()
    assert stepper.settle()  # the figures are drawn in the background
    assert "step 2 · stage 0 · batch_0 = {A, B}" in stepper.label.value and stepper.step.value == 2
    assert "invariant 2" in stepper.text.value and stepper.strip.value != strip and stepper.gantt.value != gantt
    stepper.preset.value = "all"
    assert stepper.settle()
    assert stepper.label.value.startswith("<b>all · step 2 · stage 0") and "no invariant violated" in stepper.text.value
    stepper.stage.value = 1
    assert "step 2 · stage 1 (last)" in stepper.label.value and stepper.play.value == 5
    stepper.play.value = 2
    assert "step 1 · stage 0 · batch_1 = {C, D}" in stepper.label.value
    stepper.prev.click()
    assert (stepper.step.value, stepper.stage.value) == (0, 1)
    box = trace_stepper(runs["all"].trace, decode)  # a lone trace, no timeline: no Gantt
    assert "all · step 0 · stage 0" in box.children[2].value


def test_text_renderings(runs, decode):
    kinds = [render_event(runs["all"].trace, i, decode).split(": ", 1)[1][:6] for i in range(6)]
    assert kinds == ["schedu", "schedu", "step 0", "step 0", "step 1", "update"]


def test_comparison_table():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 5, 3], [1, 2, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    stats = {"acceptance_rate": 0.5, "tokens_per_forward": 2.0, "target_forwards": 7}
    table = render_comparison([("x", stats, {"A": [1, 5], "B": [2]})], {"A": [1, 2], "B": [2]})
    assert table.splitlines()[1].endswith("1/2 (A@1)")
