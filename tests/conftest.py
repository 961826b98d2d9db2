import os

# The models are tiny: a second intra-op thread gains nothing, and on a shared
# machine its spin-waiting made runs 20-100x slower (0.15 s -> 3-20 s measured).
# The variable reaches worker processes ("mp") too.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from minispec.config import DEFAULT_DRAFT, DEFAULT_TARGET

torch.set_num_threads(1)  # so no test needs a fixture of its own for it

# Shared helpers: test files import them (``from conftest import cached_state``).
SMALL_LLAMA = dict(
    vocab_size=97, hidden_size=96, intermediate_size=160, num_hidden_layers=5,
    num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=256,
    rope_theta=5000.0, tie_word_embeddings=True,
)


def save_random_llama(path, **overrides):
    """A small randomly initialised transformers Llama saved as a checkpoint directory."""
    from minispec.lab.experiments.overlap import random_llama

    return random_llama(path, seed=1, **{**SMALL_LLAMA, **overrides})


def cached_state(req_id, prompt, output=(), blocks=(0,)):
    """A runner's CachedRequestState for token ids ``prompt`` + ``output``, nothing computed yet."""
    from minispec.sampling_params import SamplingParams
    from minispec.v1.worker.gpu_input_batch import CachedRequestState

    return CachedRequestState(req_id, list(prompt), SamplingParams(), None, list(blocks), len(prompt), list(output))


@pytest.fixture(scope="session")
def decode():
    """Token id -> character, for the shipped tokenizer."""
    from minispec.lab.exercises.attempts import decoder

    return decoder()


@pytest.fixture(scope="session")
def visible_decode():
    """The same, with spaces drawn as ␣ (as the figures draw them)."""
    from minispec.lab.exercises.attempts import decoder

    return decoder(visible_spaces=True)


@pytest.fixture(scope="session")
def random_llama_dir(tmp_path_factory):
    return save_random_llama(tmp_path_factory.mktemp("random-llama"))


@pytest.fixture(scope="session", params=["target", "draft", "random"])
def any_checkpoint(request, random_llama_dir):
    return {"target": DEFAULT_TARGET, "draft": DEFAULT_DRAFT, "random": random_llama_dir}[request.param]


# hypothesis profiles (tests/test_properties.py): "ci" is the default, 300
# examples; "long" for a local soak: pytest tests/test_properties.py --hypothesis-profile=long
from hypothesis import HealthCheck, settings  # noqa: E402

_slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=_slow_ok, print_blob=True)
settings.register_profile("long", max_examples=5000, deadline=None, suppress_health_check=_slow_ok, print_blob=True)
settings.load_profile("ci")
