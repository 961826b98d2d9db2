"""One pipeline stage of the relay design: SGLang's way of telling the non-last stages
what the last stage decided (``model_runner="relay"``; SGLang PR #30775, "Pipeline
parallelism x speculative decoding", and ``SchedulerPPMixin.event_loop_pp`` in
``python/sglang/srt/managers/scheduler_pp_mixin.py``, from reading the code).

Why "relay": SGLang PR #30775's own word for it: non-spec PP decode "already relies on a
last->first output-dict relay", and with speculative decoding "the relay payload just grows".
SGLang names no runner for it:
the relay lives in its scheduler's PP loop, which minispec's engine does not have, so here
it is a runner design beside V1 and V2, selected by ``model_runner="relay"``.

Drafts are proposed only on the last stage, which after each batch starts one payload
around the ring (``pp_relay.py``): last -> 0 -> 1 -> ... -> the stage before the last,
each stage applying it to its own state and forwarding it. A stage's state is Model
Runner V2's (persistent slots, ``gpu/states.py``; an input batch gathered from them,
``gpu/input_batch.py``), shared through ``gpu/model_runner_base.GPUModelRunnerBase``, which
reads no switch, and with replicated drafting through ``stage.RelayStage``; this design adds what travels and along which path (``RelayHandler``),
and a non-last stage *setting* its ``num_computed_tokens`` from the relayed
``new_seq_lens`` where V2 subtracts ``num_rejected`` from an optimistic count. It imports
nothing of V2's runner or switches (``tests/test_layout.py``).

Its switches (``runner_fixes.py``), each resolved once here: ``pairing`` (handed to
``RelayHandler``; fault preset ``relay-pairing``, SGLang PR #40001) and ``commit``
(``relay-no-seq-lens``: a payload without ``new_seq_lens``, so the non-last stages keep
their optimistic count).

Left out: everything SGLang's scheduler does besides the relay (its radix cache, its own
micro-batch scheduler; minispec's scheduler is V1's), EAGLE's draft extend, overlap
scheduling. A tree of drafts is carried as its accepted tokens, from which each stage derives
the path (``tree_kv.py``); the node indices SGLang's fix relays are not sent.
(vLLM 0.30.0: ``vllm/v1/worker/gpu/model_runner.py``, its nearest twin.)
"""

from __future__ import annotations

from minispec.v1.worker.relay.pp_relay import mb_slot
from minispec.v1.worker.relay.runner_fixes import COMMIT_SEQ_LENS, PAIRING
from minispec.v1.worker.relay.stage import RelayStage, commit_seq_lens
from minispec.v1.worker.tree_kv import compacts_on_every_rank
from minispec.v1.worker.tree_switches import TREE_COMPACTION_RELAY


class RelayModelRunner(RelayStage):
    def __init__(self, vllm_config, rank: int, device, recorder=None):
        """The relay's stage, with its switches resolved (``runner_fixes.py``)."""
        super().__init__(vllm_config, rank, device, recorder)
        switches = vllm_config.switches
        self.pairing = switches.pick(PAIRING, mb_slot)
        self.commit = switches.pick(COMMIT_SEQ_LENS, commit_seq_lens)
        self.tree_kv.compacts = switches.pick(TREE_COMPACTION_RELAY, compacts_on_every_rank)(self.is_last_rank)
