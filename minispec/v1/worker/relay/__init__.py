"""The relay designs, after SGLang: one payload relayed around the ring tells the non-last
stages what the last stage sampled and drafted (``model_runner.py``, ``pp_relay.py``,
its switches in ``runner_fixes.py``), and replicated drafting sends only the accept
result (``replicated.py``); ``stage.py`` is what both share. Both plug in through the
runner contract alone (``docs/adding_a_runner.md``); their SGLang sources:
``docs/fidelity/relay.md``. (vLLM 0.30.0: ``vllm/v1/worker/gpu/``, its nearest twin.)
"""
