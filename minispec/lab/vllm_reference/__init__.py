"""vLLM's own code in the loop: the reference harness.

minispec mirrors vLLM; this package checks that by execution. It downloads vLLM
releases' Python sources into a cache outside the repository
(``environment``), runs minispec's scenarios and records every scheduler output
and every stage's buffers (``capture``, ``reference_schedules``), runs vLLM's own
``InputBatch`` and ``GPUModelRunner._update_states`` on those scheduler outputs
in one subprocess per release (``worker``), and compares every buffer after
every stage-step (``compare``, ``run``); ``report`` and ``artifact`` render the
results. Model Runner V2 has its own three: ``v2_capture`` (minispec's slots),
``v2_worker`` (vLLM 0.29.0's and 0.30.0's own V2 request state, ``PPHandler`` and
broadcast post-processing, their Triton kernels in Triton's interpreter) and
``v2_run`` (the pairings). ``make vllm-check`` runs it all. No vLLM code is stored here. ``twin_map``
reads, from minispec's docstrings, which vLLM file each module mirrors, and checks
those files against the cached releases.

vLLM twin: none (minispec's own tooling).
"""
