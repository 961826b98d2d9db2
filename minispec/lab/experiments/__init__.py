"""The runs the lessons make and measure.

``schedule``: a ``Schedule`` (plain data) and the one engine builder and runner for it,
with the cached greedy reference; ``scenarios``: what is run (the forum thread's
scenario, seeded random schedules); ``metrics``: acceptance and divergence measured on
traces; ``overlap``: what the batch queue buys, timed; ``v2_watch``: Model Runner V2's
broadcast and slots, watched through the engine's listener.

What a notebook imports from here (``from minispec.lab.experiments import ...``), by module:

* ``scenarios``: ``PROMPTS``, ``FIRST_DECODE``, ``batch_label``, ``forum_thread``,
  ``forum_thread_llm``, ``forum_thread_reference``, ``thread_schedule``, ``random_config``;
* ``schedule``: ``Schedule``, ``build_llm``, ``run_schedule``;
* ``metrics``: ``acceptance_summary``, ``alpha_by_position``, ``chi_square``, ``first_divergence``;
* ``overlap``: ``first_batches``, ``measure_overlap``;
* ``v2_watch``: ``run_watched``;
* ``handover``: ``compare_designs``, ``count_handover``, ``Workload``;
* ``async_scheduling``: ``run_ahead``;
* ``rejection_sampling``: ``rejection_draws``;
* ``beyond_tokens``: ``tree_kv_run`` (state that is not tokens);
* ``batch_queue``: ``SHORT_PROMPTS``, ``STAGGERED``, ``queued``, ``batches``, ``watch_rows``;
* ``hand_batch``: ``cached_request``;
* ``same_inputs``: ``stage_inputs``, ``same_inputs_on_every_stage``.

vLLM twin: none.
"""

from minispec.lab.surface import lazy_surface

_SURFACE = {
    "scenarios": ("PROMPTS", "FIRST_DECODE", "batch_label", "forum_thread", "forum_thread_llm",
                  "forum_thread_reference", "thread_schedule", "random_config"),
    "schedule": ("Schedule", "build_llm", "run_schedule"),
    "metrics": ("acceptance_summary", "alpha_by_position", "chi_square", "first_divergence"),
    "overlap": ("first_batches", "measure_overlap"),
    "v2_watch": ("run_watched",),
    "handover": ("compare_designs", "count_handover", "Workload"),
    "async_scheduling": ("run_ahead",),
    "rejection_sampling": ("rejection_draws",),
    "beyond_tokens": ("tree_kv_run",),
    "batch_queue": ("SHORT_PROMPTS", "STAGGERED", "queued", "batches", "watch_rows"),
    "hand_batch": ("cached_request",),
    "same_inputs": ("stage_inputs", "same_inputs_on_every_stage"),
}
__all__, __getattr__, __dir__ = lazy_surface(__name__, _SURFACE)
