"""vLLM's own code in the loop: the reference harness, beside the package (not installed).

minispec mirrors vLLM; this package checks that by execution. It builds virtual
environments and downloads vLLM releases into a cache outside the repository
(``environment``, ``sources``), runs minispec's scenarios and records every
scheduler output and every stage's buffers (``capture``, ``reference_schedules``),
runs vLLM's own ``InputBatch`` and ``GPUModelRunner._update_states`` on those
scheduler outputs in one subprocess per release (``worker``), and compares every
buffer after every stage-step (``compare``, ``run``); ``report`` renders the
results and ``artifact`` writes what notebook 07 shows
(``minispec/lab/records/artifacts/thread.json``, which the package reads). Model
Runner V2 has its own three: ``v2_capture`` (minispec's slots), ``v2_worker``
(vLLM 0.29.0's and 0.30.0's own V2 request state, ``PPHandler`` and broadcast
post-processing, their Triton kernels in Triton's interpreter) and ``v2_run`` (the
pairings); ``scheduler_check`` runs vLLM's own ``Scheduler`` beside minispec's.
``citations`` parses and checks every citation of vLLM source (``make cite-check``,
``tools/cite_check.py``). ``make vllm-check`` runs it all as ``python -m reference``
from the repository root. No vLLM code is stored here.

It lives outside ``minispec/`` so that the installed package (``pip install .``)
holds no code that runs pip or builds environments: a learner never needs it.

vLLM twin: none (minispec's own tooling).
"""
