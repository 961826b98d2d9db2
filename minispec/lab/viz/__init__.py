"""The renderers: pure functions from traces and records to text, figures and widgets.

What a notebook imports from here (``from minispec.lab.viz import ...``), by module:

* ``exploration``: ``render_counterexample``, ``render_exploration``;
* ``text``: ``char_decoder``, ``render_step``, ``render_stage``, ``render_trace``,
  ``render_comparison``, ``output_step``;
* ``row_log``: ``render_row_log``, ``row_changes``;
* ``batch``: ``render_batch``, ``render_gather``, ``LEGEND``;
* ``history``: ``render_history``, ``plot_history``;
* ``bisect``: ``render_bisect``;
* ``catches``: ``catch_table``;
* ``spec``: ``render_acceptance_table``, ``plot_rejection_example``, ``plot_acceptance_vs_k``,
  ``plot_sampled_vs_target``;
* ``faults``: ``render_fault_run``;
* ``slots``: ``render_broadcast``, ``render_slots``;
* ``sync_designs``: ``designs_table``, ``plot_designs``;
* ``handover_costs``: ``handover_table``, ``plot_handover``;
* ``sync_timeline``: ``timeline_table``, ``plot_timeline``;
* ``pairing``: ``plot_pairing``;
* ``placeholders``: ``render_ahead``;
* ``tree_figure``: ``render_tree``;
* ``map``: ``render_map``, ``flow``, ``FULL``, ``WORKSHOP``;
* ``gantt``: ``plot_gantt``, ``plot_gantt_compare``;
* ``plots``: ``plot_step_rows``, ``plot_stage_rows``, ``plot_strip_diff``, ``plot_acceptance``;
* ``stepper``: ``thread_runs``, ``schedule_runs``;
* ``widgets``: ``trace_stepper``.

vLLM twin: none.
"""

from minispec.lab.surface import lazy_surface

_SURFACE = {
    "exploration": ("render_counterexample", "render_exploration"),
    "text": ("char_decoder", "render_step", "render_stage", "render_trace", "render_comparison", "output_step"),
    "row_log": ("render_row_log", "row_changes"),
    "batch": ("render_batch", "render_gather", "LEGEND"),
    "history": ("render_history", "plot_history"),
    "bisect": ("render_bisect",),
    "catches": ("catch_table",),
    "spec": ("render_acceptance_table", "plot_rejection_example", "plot_acceptance_vs_k", "plot_sampled_vs_target"),
    "faults": ("render_fault_run",),
    "slots": ("render_broadcast", "render_slots"),
    "sync_designs": ("designs_table", "plot_designs"),
    "handover_costs": ("handover_table", "plot_handover"),
    "sync_timeline": ("timeline_table", "plot_timeline"),
    "pairing": ("plot_pairing",),
    "placeholders": ("render_ahead",),
    "tree_figure": ("render_tree",),
    "map": ("render_map", "flow", "FULL", "WORKSHOP"),
    "gantt": ("plot_gantt", "plot_gantt_compare"),
    "plots": ("plot_step_rows", "plot_stage_rows", "plot_strip_diff", "plot_acceptance"),
    "stepper": ("thread_runs", "schedule_runs"),
    "widgets": ("trace_stepper",),
}
__all__, __getattr__, __dir__ = lazy_surface(__name__, _SURFACE)
