"""What is recorded about vLLM, for the lessons to read: the bottom layer of the lab.

``threads``: the one table of cited GitHub threads (dates, states, quotes);
``twin_map``: each minispec module's vLLM twin and what it leaves out, read from the
docstrings; ``artifact``: what vLLM's own code did on minispec's schedules, stored in
``artifacts/thread.json`` and rendered for notebook 07. Nothing here runs vLLM or
imports the rest of the lab: the harness that runs vLLM and writes the artifact lives
beside the package, in ``reference/`` (``make vllm-check``), and is not installed.

vLLM twin: none.
"""
