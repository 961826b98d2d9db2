"""The relay designs: SGLang's way of telling the non-last pipeline stages what the last
stage sampled and drafted, one payload relayed around the ring (SGLang PR #30775), and
replicated drafting, where only the accept result travels (SGLang PR #27620).
``model_runner.py`` is the relay's stage (``stage.py`` what both designs share), ``pp_relay.py`` the payload and its path,
``replicated.py`` the fourth design, ``runner_fixes.py`` the relay's switches. Both plug in
through the runner contract alone (``docs/adding_a_runner.md``).
(vLLM 0.30.0: ``vllm/v1/worker/gpu/``, its nearest twin.)
"""
