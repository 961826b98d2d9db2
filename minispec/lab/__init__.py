"""The lessons on top of the engine, behind one surface: ``from minispec.lab import ...``.

Everything here calls ``minispec.LLM`` or reads traces; the engine never imports it.
Nothing here has a vLLM twin. The notebooks import lab code from this module only
(``tests/test_lab_surface.py``), so the folders below can move without touching a
notebook. A name is imported from its module on first use, so ``import minispec.lab``
itself loads nothing heavy (no torch, transformers or matplotlib).

The folders, one job each:

* ``experiments/``: the runs and what they measure;
* ``exercises/``: the workshop's exercises and their checker;
* ``faults/``: the 2026 fault family;
* ``explorer/``: the explorer (every schedule of a scope, its coverage, liveness, the sweep of
  every design) and the mutation benchmark, above the faults it explores;
* ``viz/``: the renderers (text, figures, widgets);
* ``records/``: what is recorded about vLLM: the cited threads, each module's vLLM
  twin, and what vLLM's own code did on minispec's schedules (stored; the harness that
  runs vLLM lives outside the package, in ``reference/``).

The surface, by job:

The explorer (``explorer``)
    ``explore``, ``search``, ``Scope``; the mutation benchmark: ``MUTANTS``, ``mutant``,
    ``explorer_catch``, ``acceptance_catch``.

Runs and scenarios (``experiments``)
    ``PROMPTS``, ``FIRST_DECODE``, ``batch_label``, ``forum_thread``, ``forum_thread_llm``,
    ``forum_thread_reference``, ``thread_schedule``, ``random_config``, ``Schedule``,
    ``build_llm``, ``run_schedule``; measured: ``acceptance_summary``, ``alpha_by_position``,
    ``chi_square``, ``first_divergence``, ``first_batches``, ``measure_overlap``;
    Model Runner V2 watched: ``run_watched``; the designs' hand-over measured: ``compare_designs``, ``count_handover``, ``Workload``;
    async scheduling watched: ``run_ahead``; the rejection sampler drawn many times: ``rejection_draws``;
    state that is not tokens: ``tree_kv_run``.

The workshop's exercises (``exercises``)
    ``check_draft_slots``, ``check_acceptance``, ``check_fix1``, ``check_fault2``,
    ``check_fix2``, ``check_condense``, ``check_recovered``, ``check_broadcast``,
    ``condense_trace``, ``thread_trace``, ``decoder``, ``show_solution``; every
    prediction's reveal (``reveal``): ``reveal``.

Faults (``faults``)
    ``FAULTS``, ``RELAY_FAULTS``, ``EVERY_FAULT``, ``LEFT_OUT``, ``run_fault``, ``TIMELINE``,
    ``DESIGNS``, ``THE_INVARIANT``; the in-flight family: ``FAMILY``, ``pairings``.

Renderers (``viz``)
    text: ``char_decoder``, ``render_step``, ``render_stage``, ``render_trace``,
    ``render_comparison``, ``output_step``, ``render_row_log``, ``row_changes``,
    ``render_batch``, ``render_gather``, ``LEGEND``, ``render_history``, ``render_bisect``, ``catch_table``,
    ``render_acceptance_table``, ``render_fault_run``, ``render_broadcast``, ``render_slots``,
    ``designs_table``, ``handover_table``, ``timeline_table``; the explorer's findings:
    ``render_counterexample``, ``render_exploration``; figures: ``render_map``, ``flow``, ``FULL``,
    ``WORKSHOP``, ``plot_gantt``, ``plot_gantt_compare``, ``plot_step_rows``,
    ``plot_stage_rows``, ``plot_strip_diff``, ``plot_acceptance``, ``plot_history``,
    ``plot_rejection_example``, ``plot_acceptance_vs_k``, ``plot_sampled_vs_target``,
    ``plot_designs``, ``plot_handover``, ``plot_timeline``, ``plot_pairing``; async scheduling: ``render_ahead``;
    a tree of drafts: ``render_tree``;
    the stepper: ``thread_runs``, ``schedule_runs``,
    ``trace_stepper``.

vLLM's own code, as recorded (``records``)
    ``load_artifact``, ``render_moment``, ``render_sources``, ``vllm_twins``,
    ``render_twins_markdown``.
"""

from __future__ import annotations

import importlib

# module (under minispec.lab) -> the names this surface takes from it
_SURFACE: dict[str, tuple[str, ...]] = {
    "experiments.scenarios": ("PROMPTS", "FIRST_DECODE", "batch_label", "forum_thread", "forum_thread_llm",
                              "forum_thread_reference", "thread_schedule", "random_config"),
    "experiments.schedule": ("Schedule", "build_llm", "run_schedule"),
    "experiments.metrics": ("acceptance_summary", "alpha_by_position", "chi_square", "first_divergence"),
    "experiments.overlap": ("first_batches", "measure_overlap"),
    "experiments.v2_watch": ("run_watched",),
    "explorer.explorer": ("explore", "search", "Scope"),
    "explorer.mutants": ("MUTANTS", "mutant", "explorer_catch", "acceptance_catch"),
    "experiments.handover": ("compare_designs", "count_handover", "Workload"),
    "experiments.run_ahead": ("run_ahead",),
    "experiments.rejection_draws": ("rejection_draws",),
    "experiments.beyond_tokens": ("tree_kv_run",),
    "exercises.checkers": ("check_draft_slots", "check_acceptance", "check_fix1", "check_fault2", "check_fix2",
                           "check_condense", "check_recovered", "check_broadcast", "condense_trace", "thread_trace",
                           "decoder", "show_solution"),
    "predictions": ("reveal",),
    "faults.catalogue": ("FAULTS", "RELAY_FAULTS", "EVERY_FAULT", "LEFT_OUT"),
    "faults.reproduce": ("run_fault",),
    "faults.pp_sync": ("TIMELINE", "DESIGNS", "THE_INVARIANT"),
    "faults.in_flight": ("FAMILY",),
    "faults.relay_pairing": ("pairings",),
    "viz.exploration": ("render_counterexample", "render_exploration"),
    "viz.text": ("char_decoder", "render_step", "render_stage", "render_trace", "render_comparison", "output_step"),
    "viz.row_log": ("render_row_log", "row_changes"),
    "viz.batch": ("render_batch", "render_gather", "LEGEND"),
    "viz.history": ("render_history", "plot_history"),
    "viz.bisect": ("render_bisect",),
    "viz.catches": ("catch_table",),
    "viz.spec": ("render_acceptance_table", "plot_rejection_example", "plot_acceptance_vs_k",
                 "plot_sampled_vs_target"),
    "viz.faults": ("render_fault_run",),
    "viz.slots": ("render_broadcast", "render_slots"),
    "viz.sync_designs": ("designs_table", "plot_designs"),
    "viz.handover_costs": ("handover_table", "plot_handover"),
    "viz.sync_timeline": ("timeline_table", "plot_timeline"),
    "viz.pairing": ("plot_pairing",),
    "viz.placeholders": ("render_ahead",),
    "viz.tree_figure": ("render_tree",),
    "viz.map": ("render_map", "flow", "FULL", "WORKSHOP"),
    "viz.gantt": ("plot_gantt", "plot_gantt_compare"),
    "viz.plots": ("plot_step_rows", "plot_stage_rows", "plot_strip_diff", "plot_acceptance"),
    "viz.stepper": ("thread_runs", "schedule_runs"),
    "viz.widgets": ("trace_stepper",),
    "records.artifact": ("load_artifact", "render_moment", "render_sources"),
    "records.twin_map": ("vllm_twins", "render_twins_markdown"),
}
_MODULE_OF = {name: module for module, names in _SURFACE.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'minispec.lab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_MODULE_OF[name]}"), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
