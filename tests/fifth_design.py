"""A throwaway fifth runner design, written as ``docs/adding_a_runner.md`` tells a new user to:
Model Runner V2's stage (``GPUModelRunnerBase``) with V2's ``PPHandler`` for its hand-over and no
switches, registered by one ``register_design`` call (``register``). Its record says what it
needs from the engine: being on V2's slots, V2's cadence under async scheduling.
Nothing of it lives outside ``tests/``."""

from minispec.v1.worker.designs import Design, one_more_than_stages, one_round, register_design
from minispec.v1.worker.gpu.input_batch import post_update
from minispec.v1.worker.gpu.model_runner_base import GPUModelRunnerBase
from minispec.v1.worker.gpu.pp_utils import PPHandler


class FifthRunner(GPUModelRunnerBase):
    def bind_pp_group(self, group) -> None:
        if self.pp_size > 1:
            self.pp_handler = PPHandler(group, self.pp_size, self.max_num_reqs, self.num_speculative_steps)

    def apply_entry(self, entry) -> None:
        """The last stage's tokens and counts, then its next drafts."""
        post_update(entry.idx_mapping, self.req_states, entry.sampled_tokens, entry.num_sampled,
                    entry.num_rejected, query_lens=None)
        if entry.draft_tokens is not None:
            self.req_states.set_draft_tokens(entry.idx_mapping, entry.draft_tokens)


FIFTH = Design("fifth", FifthRunner, "a test's design: V2's slots and broadcast, no switches",
               async_batches_in_flight=one_more_than_stages, decode_wait_batches=one_round)


def register() -> Design:
    return register_design(FIFTH)
