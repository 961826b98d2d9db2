"""Alt text of the renderers' figures (minispec/lab/viz/figure.py): from what they draw."""

from minispec.lab.viz.figure import MAX_CHARS, DescribedFigure, describe
from minispec.lab.viz.spec import plot_acceptance_vs_k


def test_describe_reads_titles_labels_and_legend():
    fig = DescribedFigure()
    fig.suptitle("two runs")
    left, right = fig.subplots(1, 2)
    left.set_title("acceptance")
    left.set_xlabel("k")
    left.plot([1, 2], label="measured")
    left.plot([1, 3], label="formula")
    left.legend()
    right.text(0, 0, "stage 0")
    right.text(0, 1, "stage 1")
    assert describe(fig) == ("two runs. panel 1: acceptance — x: k — legend: measured, formula. "
                             "panel 2: stage 0, stage 1")


def test_the_alt_text_rides_on_the_png_output():
    fig = plot_acceptance_vs_k([{"k": k, "mean_acceptance_length": 1.5, "accepted_per_drafted": 0.6,
                                 "conditional_alpha": 0.7} for k in (1, 2)])
    data, metadata = fig._repr_mimebundle_()
    assert data == {}, "the PNG itself is the inline backend's, unchanged"
    alt = metadata["image/png"]["alt"]
    assert alt == describe(fig) and alt.startswith("panel 1: Mean acceptance length — x: k (drafts per step)")


def test_a_long_description_is_cut():
    fig = DescribedFigure()
    fig.suptitle("x" * (2 * MAX_CHARS))
    assert len(describe(fig)) == MAX_CHARS and describe(fig).endswith("…")
    assert describe(DescribedFigure()) == "a figure"
