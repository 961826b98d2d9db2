"""The speculative-decoding renderers: counts against hand-worked traces and a real run,
the formula, the chi-square test, and what the figures draw."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from minispec import LLM, SamplingParams
from minispec.instruments.trace import ScheduleRecord, StepRecord, Trace
from minispec.lab.experiments.metrics import (
    acceptance_summary,
    alpha_by_position,
    chi_square,
    expected_tokens_per_forward,
    verifications,
)
from minispec.lab.viz.spec import (
    plot_acceptance_vs_k,
    plot_rejection_example,
    plot_sampled_vs_target,
    render_acceptance_table,
)


def hand_trace(steps: list[dict[str, tuple[int, int]]]) -> Trace:
    """One step per dict of request -> (drafts scheduled, drafts accepted)."""
    trace = Trace("all", 1)
    for i, reqs in enumerate(steps):
        schedule = ScheduleRecord(
            step=i, num_scheduled_tokens={r: 1 + d for r, (d, _) in reqs.items()},
            scheduled_spec_decode_tokens={r: [7] * d for r, (d, _) in reqs.items()},
            new_token_ids={}, num_computed_tokens={}, all_token_ids={}, new_req_ids=[], num_prompt_tokens={},
        )
        trace.steps.append(StepRecord(schedule, num_accepted={r: a for r, (_, a) in reqs.items()}))
    return trace


def test_acceptance_counts_on_a_hand_worked_trace():
    # all 3 accepted; 1 accepted then a rejection; rejected at once; a prefill (no drafts)
    trace = hand_trace([{"A": (3, 3), "B": (3, 1)}, {"A": (3, 0), "C": (0, 0)}])
    assert verifications(trace) == [(3, 3), (3, 1), (3, 0)]
    s = acceptance_summary(trace)
    assert (s["drafted"], s["accepted"], s["verifications"]) == (9, 4, 3)
    assert s["accepted_per_drafted"] == pytest.approx(4 / 9)
    assert s["conditional_alpha"] == pytest.approx(4 / 6)  # examined: 3 + (1 + 1) + (0 + 1)
    assert s["mean_acceptance_length"] == pytest.approx(7 / 3)
    assert alpha_by_position(trace) == pytest.approx([2 / 3, 1 / 2, 1.0])
    with pytest.raises(ValueError, match="no verification steps"):
        acceptance_summary(hand_trace([{"A": (0, 0)}]))


def test_counts_agree_with_the_engine():
    llm = LLM(speculative_config={"method": "draft_model", "num_speculative_tokens": 3}, record=True)
    llm.generate(["A list is ", "The for statement "], SamplingParams(temperature=0, max_tokens=24))
    s, stats = acceptance_summary(llm.trace), llm.stats()
    assert (s["drafted"], s["accepted"]) == (stats["draft_tokens"], stats["accepted_tokens"])
    assert s["conditional_alpha"] > s["accepted_per_drafted"] > 0
    # the engine's tokens per target forward counts each request's prefill pass too (one token each);
    # the mean acceptance length counts verifications only
    assert stats["tokens_per_forward"] == pytest.approx(stats["generated_tokens"] / (s["verifications"] + 2))
    assert s["mean_acceptance_length"] == pytest.approx(1 + s["accepted"] / s["verifications"])
    # every verification had k drafts here, so the per-position product is exact
    assert {d for d, _ in verifications(llm.trace)} == {3}
    alphas = alpha_by_position(llm.trace)
    assert sum(np.prod(alphas[:i]) for i in range(4)) == pytest.approx(s["mean_acceptance_length"])


def test_chi_square_pools_small_bins_and_detects_a_wrong_distribution():
    probs = np.array([0.5, 0.3, 0.199, 0.001])
    stat, dof, p = chi_square([500, 300, 199, 1], probs)
    assert stat == pytest.approx(0.0) and p == pytest.approx(1.0)
    assert dof == 3  # three bins kept, the fourth (expected 1) pooled on its own
    assert chi_square([600, 200, 199, 1], probs)[2] < 1e-6
    with pytest.raises(ValueError, match="counts has shape"):
        chi_square([1, 2], probs)


def test_table_and_acceptance_figure():
    rows = [{"k": k, "accepted_per_drafted": 0.8 - 0.05 * k, "conditional_alpha": 0.8, "mean_acceptance_length": 1 + k / 2}
            for k in (1, 2, 3)]
    table = render_acceptance_table(rows).splitlines()
    assert len(table) == 4 and table[1].split()[:4] == ["1", "0.750", "0.800", "1.50"]
    assert table[3].split()[-1] == f"{expected_tokens_per_forward(0.8, 3):.2f}"
    fig = plot_acceptance_vs_k(rows)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    left = {line.get_label(): line.get_ydata().tolist() for line in fig.axes[0].get_lines()}
    assert left["measured"] == [1.5, 2.0, 2.5]
    assert left["ceiling k + 1 (all accepted)"] == [2, 3, 4]
    assert fig.axes[0].get_legend() is not None and fig.axes[1].get_legend() is not None


def test_rejection_example_draws_p_q_acceptance_and_residual():
    p, q = [0.4, 0.3, 0.15, 0.1, 0.05], [0.1, 0.5, 0.1, 0.2, 0.1]
    fig = plot_rejection_example(p, q, list("abcde"), recovered_freq=[0.86, 0, 0.14, 0, 0])
    heights = [[round(bar.get_height(), 4) for bar in ax.patches] for ax in fig.axes]
    assert heights[0] == p + q
    assert heights[1] == [1.0, 0.6, 1.0, 0.5, 0.5]
    assert heights[2] == pytest.approx([0.3 / 0.35, 0, 0.05 / 0.35, 0, 0], abs=1e-4)
    assert {str(bar.get_hatch() or "") for bar in fig.axes[0].patches} == {"", "//"}  # not colour alone
    assert [t.get_text() for t in fig.axes[1].texts] == ["1.00", "0.60", "1.00", "0.50", "0.50"]


def test_sampled_histogram_orders_by_target_probability():
    probs = np.array([0.1, 0.6, 0.3])
    fig = plot_sampled_vs_target([12, 55, 33], probs, ["x", "y", "z"], top=2)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["y", "z"]
    assert [bar.get_height() for bar in ax.patches] == pytest.approx([0.55, 0.33])
