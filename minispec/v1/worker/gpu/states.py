"""Per-request state in persistent slots (vLLM 0.30.0: ``vllm/v1/worker/gpu/states.py``,
``RequestState``).

Model Runner V2 gives each request a *slot* (``req_idx``) when it is added and keeps it
until the request finishes or is preempted. Everything a stage needs to build its next
input lives there, on every stage alike: ``all_token_ids`` (prompt and every token
sampled), ``num_computed_tokens`` (the runner's own count; ``num_computed_tokens_np``
mirrors the scheduler's), ``last_sampled_tokens`` (embedded first by a decode step) and
``draft_tokens`` (embedded after it). Nothing moves between slots; a freed slot goes to
the next new request. Left out: the UVA/GPU split and staged writes
(``StagedWriteTensor``, ``UvaBackedTensor``: minispec's slots are numpy arrays),
``next_prefill_tokens`` (EAGLE's prefill lookahead), multimodal and LoRA state.
Fidelity to vLLM: ``docs/fidelity/model_runner_v2.md``.
"""

from __future__ import annotations

import numpy as np


class RequestState:
    def __init__(self, max_num_reqs: int, max_model_len: int, num_speculative_steps: int):
        self.max_num_reqs, self.max_model_len = max_num_reqs, max_model_len
        self.num_speculative_steps = num_speculative_steps
        self.req_id_to_index: dict[str, int] = {}
        self.index_to_req_id: dict[int, str] = {}
        self.free_indices = list(range(max_num_reqs))

        self.all_token_ids = np.zeros((max_num_reqs, max_model_len), dtype=np.int64)
        # prompt_len: the user's prompt; prefill_len: what the runner was given to
        # prefill, prompt plus outputs for a request resumed after preemption (vLLM ``states.py`` 40-48).
        self.prompt_len = np.zeros(max_num_reqs, dtype=np.int64)
        self.prefill_len = np.zeros(max_num_reqs, dtype=np.int64)
        self.total_len = np.zeros(max_num_reqs, dtype=np.int64)
        self.num_computed_tokens = np.zeros(max_num_reqs, dtype=np.int64)
        self.num_computed_tokens_np = np.zeros(max_num_reqs, dtype=np.int64)
        self.last_sampled_tokens = np.zeros(max_num_reqs, dtype=np.int64)
        self.max_seq_len = np.zeros(max_num_reqs, dtype=np.int64)
        self.draft_tokens = np.zeros((max_num_reqs, num_speculative_steps), dtype=np.int64)

    @property
    def num_reqs(self) -> int:
        return len(self.req_id_to_index)

    def add_request(self, req_id: str, prompt_len: int, all_token_ids: list[int], num_computed_tokens: int,
                    max_tokens: int) -> int:
        """Give the request a slot and fill it; return the slot."""
        if not self.free_indices:
            raise RuntimeError(f"RequestState is full ({self.max_num_reqs} slots): expected the scheduler to "
                               f"run at most max_num_seqs requests, adding {req_id!r}")
        req_idx = self.free_indices.pop()
        self.req_id_to_index[req_id] = req_idx
        self.index_to_req_id[req_idx] = req_id
        prefill_len = len(all_token_ids)
        self.max_seq_len[req_idx] = prompt_len + max_tokens
        self.prompt_len[req_idx], self.prefill_len[req_idx] = prompt_len, prefill_len
        self.total_len[req_idx] = prefill_len
        self.all_token_ids[req_idx, :prefill_len] = all_token_ids
        self.num_computed_tokens[req_idx] = self.num_computed_tokens_np[req_idx] = num_computed_tokens
        # vLLM 0.30.0 clears the drafts (117): a first step that is a decode padded with
        # placeholder drafts (a prefix-cache hit) embeds them. PR #39833 (April 2026) also
        # set last_sampled_tokens here; that half is not in this file in 0.30.0 or 0.33.0,
        # and a padded first step embeds the prompt's last token, not it.
        self.draft_tokens[req_idx] = 0
        return req_idx

    def remove_request(self, req_id: str) -> int | None:
        """Free the slot (its arrays keep their values: the next occupant overwrites
        what it uses). Return it, or None for a request this state never held."""
        req_idx = self.req_id_to_index.pop(req_id, None)
        if req_idx is None:
            return None
        self.index_to_req_id.pop(req_idx, None)
        self.free_indices.append(req_idx)
        return req_idx

    def set_draft_tokens(self, idx_mapping: np.ndarray, draft_tokens: np.ndarray) -> None:
        """Write row ``i``'s drafts into slot ``idx_mapping[i]`` (-1: skip). The one write of
        drafts a stage was sent, shared by the designs built on these slots (V2's broadcast,
        the relay's payload)."""
        keep = idx_mapping >= 0
        self.draft_tokens[idx_mapping[keep]] = draft_tokens[keep]

    def set_drafts(self, req_idx: int, drafts) -> None:
        """The slot's next drafts, as a proposer returned them (fewer than k: zeros after)."""
        self.draft_tokens[req_idx] = 0
        self.draft_tokens[req_idx, : len(drafts)] = drafts

    def token_ids(self, req_idx: int) -> list[int]:
        """The slot's history: prompt and every token sampled so far."""
        return self.all_token_ids[req_idx, : self.total_len[req_idx]].tolist()
