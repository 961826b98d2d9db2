"""One pipeline stage of the relay design: SGLang's way of telling the non-last stages what
the last stage decided (``model_runner="relay"``; SGLang's
``SchedulerPPMixin.event_loop_pp`` in
``python/sglang/srt/managers/scheduler_pp_mixin.py``).

SGLang's relay lives in its scheduler's PP loop, which minispec's engine does not have,
so here it is a runner design beside V1 and V2: the last stage drafts and starts one
payload around the ring (``pp_relay.py``); every other stage applies it to its own V2
slots (``stage.RelayStage``) and forwards it. Its switches, ``pairing`` and ``commit``,
are resolved once here; it imports nothing of V2's runner or switches. A tree of drafts
is carried as its accepted tokens, from which each stage derives the path
(``tree_kv.py``). Left out: everything SGLang's scheduler does besides the relay (its
radix cache, its own micro-batch scheduler; minispec's scheduler is V1's), EAGLE's draft
extend, overlap scheduling. SGLang's pull requests: ``docs/fidelity/relay.md``. (vLLM
0.30.0: ``vllm/v1/worker/gpu/model_runner.py``, its nearest twin.)
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
