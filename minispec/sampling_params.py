"""``SamplingParams`` (vLLM: ``vllm/sampling_params.py``), reduced to what minispec
samples with. Values are checked on construction, so a bad request is refused
before it reaches the engine and cannot disturb other requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minispec.config import is_int


@dataclass
class SamplingParams:
    """How one request samples: ``temperature`` (0 is greedy), ``top_k``, ``top_p``, at most
    ``max_tokens``, its stop tokens and ``seed``. Checked when made, so a bad value is refused
    before the engine sees it."""

    temperature: float = 1.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0
    max_tokens: int = 16
    stop_token_ids: list[int] | None = field(default_factory=list)  # None means none, as in vLLM
    ignore_eos: bool = False
    seed: int | None = None

    def __post_init__(self):
        if self.stop_token_ids is None:
            self.stop_token_ids = []
        elif isinstance(self.stop_token_ids, (list, tuple)):
            self.stop_token_ids = list(self.stop_token_ids)
        checks = [
            ("temperature", isinstance(self.temperature, (int, float)) and self.temperature >= 0, "a number >= 0"),
            ("top_k", is_int(self.top_k) and self.top_k >= 0, "an integer >= 0 (0 disables top-k)"),
            ("top_p", isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1, "a number in (0, 1]"),
            ("max_tokens", is_int(self.max_tokens) and self.max_tokens > 0, "an integer > 0"),
            ("seed", self.seed is None or (is_int(self.seed) and 0 <= self.seed < 2**63),
             "None or an integer in [0, 2**63)"),
            ("stop_token_ids", isinstance(self.stop_token_ids, list) and all(is_int(t) for t in self.stop_token_ids),
             "None or a list of integers"),
            ("ignore_eos", isinstance(self.ignore_eos, bool), "True or False"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise ValueError(f"SamplingParams.{name}={getattr(self, name)!r}: expected {expected}")

    @property
    def greedy(self) -> bool:
        # vLLM treats temperatures below a small epsilon as greedy.
        return self.temperature < 1e-5
