"""vLLM's own code in the loop: the reference harness.

minispec mirrors vLLM; this package checks that by execution. It downloads vLLM
releases' Python sources into a cache outside the repository
(``environment``), runs minispec's scenarios and records every scheduler output
and every stage's buffers (``capture``, ``reference_schedules``), runs vLLM's own
``InputBatch`` and ``GPUModelRunner._update_states`` on those scheduler outputs
in one subprocess per release (``worker``), and compares every buffer after
every stage-step (``compare``, ``run``); ``report`` and ``artifact`` render the
results. ``make vllm-check`` runs it all. No vLLM code is stored here. ``twin_map``
reads, from minispec's docstrings, which vLLM file each module mirrors, and checks
those files against the cached releases.

vLLM twin: none (minispec's own tooling).
"""
