"""Model Runner V2 (vLLM 0.30.0: ``vllm/v1/worker/gpu/``, "[Experimental] Model Runner V2"
in its README), minispec's second runner design: per-request state in persistent slots
(``states.py``), an input batch gathered from them each step (``input_batch.py``), and
under pipeline parallelism the last stage's broadcast of what it sampled and drafted
(``pp_utils.py``), applied by every other stage (``model_runner.py``). Selected by
``model_runner="v2"``, or by ``MINISPEC_USE_V2_MODEL_RUNNER`` (vLLM:
``VLLM_USE_V2_MODEL_RUNNER``); unset, minispec builds V1, the runner the workshop is
about. Left out: vLLM's automatic choice and its list of features V2 does not support
yet (``_get_v2_model_runner_unsupported_features``).
"""

from __future__ import annotations

import os

from minispec.v1.worker.switches import ModelRunner

ENV_VAR = "MINISPEC_USE_V2_MODEL_RUNNER"
_VALUES = {"1": True, "true": True, "0": False, "false": False, "": False}


def default_model_runner() -> ModelRunner:
    """What ``model_runner=None`` means: the environment variable's choice, else "v1"."""
    return ModelRunner.V2 if use_v2_model_runner() else ModelRunner.V1


def use_v2_model_runner() -> bool:
    value = os.environ.get(ENV_VAR, "")
    if value.lower() not in _VALUES:
        raise ValueError(f"{ENV_VAR}={value!r}: expected 1 or 0 (true or false)")
    return _VALUES[value.lower()]
