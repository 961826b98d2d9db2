"""Every figure the workshop draws is legible on a projected 1280×720 screen: each text
at least 14 px high where JupyterLab shows the figure (``minispec.lab.viz.legible``'s
rule: the output area is 848 px wide with the file browser open at 100 % zoom, and a
wider figure is scaled down to it)."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from minispec.lab.viz import gantt, history, plots, spec
from minispec.lab.viz.legible import MIN_PX, SCREEN_PX, shown_px, too_small
from minispec.lab.viz.stepper import stepper_view, thread_runs
from minispec.lab.viz.stepper_figures import PROJECTOR_DPI, StepperFigures
from tests.test_viz_history import shifted_step


def test_a_figure_wider_than_the_screen_shows_its_type_smaller():
    assert shown_px(7.5, 1000) == pytest.approx(7.5 * 100 / 72 * SCREEN_PX / 1000)  # 8.8 px: the dry run's 7-8
    assert shown_px(10.5, 800) == pytest.approx(10.5 * 100 / 72)  # fits: drawn 1:1
    assert shown_px(10, 1300, dpi=130) == pytest.approx(10 * 130 / 72 * SCREEN_PX / 1300)


def test_the_measure_finds_small_type_and_skips_hidden_tick_labels():
    fig = Figure(figsize=(10, 3))  # 1000 px wide: 10.5 pt shows as 12.4 px
    ax = fig.subplots()
    fig.text(0.0, 0.5, "small", fontsize=10.5)  # the texts at both edges: the tight box stays 1000 px
    fig.text(1.0, 0.5, "big", fontsize=14, ha="right")
    ax.axis("off")  # its tick labels are not drawn, so they are not measured
    assert [text for text, _ in too_small(fig)] == ["small"]


@pytest.fixture(scope="module")
def runs():
    return thread_runs(max_tokens=8)


def figures(runs, decode):
    thread, fixed = runs["vllm-0.9.2"].trace, runs["all"].trace
    timeline = runs["vllm-0.9.2"].timeline
    p, q = np.array([0.5, 0.2, 0.15, 0.1, 0.05]), np.array([0.2, 0.4, 0.2, 0.1, 0.1])
    rows = [{"k": k, "mean_acceptance_length": 1.5, "accepted_per_drafted": 0.6, "conditional_alpha": 0.7}
            for k in (1, 2, 3, 4)]
    return {  # what notebooks 01-05 and 08 draw, on a real run
        "step rows": lambda: plots.plot_step_rows(thread.step(2), decode),
        "strip diff": lambda: plots.plot_strip_diff({"vllm-0.9.2": thread.step(2), "all": fixed.step(2)}, 0, decode),
        "acceptance": lambda: plots.plot_acceptance({p: r.trace for p, r in runs.items()}),
        "presets": lambda: plots.plot_presets({p: r.trace for p, r in runs.items()}),
        "gantt": lambda: gantt.plot_gantt(timeline, title="thread", highlight=(2, 0), max_step=5),
        "gantt compare": lambda: gantt.plot_gantt_compare({"long": (timeline, 7), "short": (timeline, 3)}),
        "history": lambda: history.plot_history(shifted_step(), "A", decode, first=0, window=10),
        "acceptance vs k": lambda: spec.plot_acceptance_vs_k(rows),
        "rejection": lambda: spec.plot_rejection_example(p, q, list("abcde"), recovered_freq=[0.86, 0, 0.14, 0, 0]),
        "sampled": lambda: spec.plot_sampled_vs_target(np.arange(20) * 3, np.ones(20) / 20,
                                                       [chr(97 + i) for i in range(20)]),
    }


NAMES = ["step rows", "strip diff", "acceptance", "presets", "gantt", "gantt compare", "history",
         "acceptance vs k", "rejection", "sampled"]


@pytest.mark.parametrize("name", NAMES)
def test_every_text_is_at_least_14_px_on_the_projected_screen(runs, decode, name):
    fig = figures(runs, decode)[name]()
    assert too_small(fig) == [], f"{name}: texts under {MIN_PX} px at 1280×720"


@pytest.mark.parametrize("projector", [False, True], ids=["laptop", "projector"])
def test_the_steppers_frames_are_legible(runs, decode, projector):
    frames = StepperFigures(runs, decode, projector=projector)
    view = stepper_view(runs, "vllm-0.9.2", 2, 0, decode)
    dpi = PROJECTOR_DPI if projector else 100
    assert too_small(frames.strip(view), dpi) == []
    assert frames.gantt(view) is None if projector else too_small(frames.gantt(view), dpi) == []
