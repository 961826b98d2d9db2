"""Prefix caching (``enable_prefix_caching``) and the padded first decode it brings.

* The block pool's bookkeeping, worked by hand: hits, reference counts, the last token never
  hit, eviction order (vLLM 0.30.0 ``block_pool.py``, ``kv_cache_manager.py``).
* The scheduler's padding of a new request's first step to ``1 + k`` against each of vLLM
  0.30.0's conditions (``vllm/v1/core/sched/scheduler.py`` 1042-1063, 1264-1270).
* Invariant 2 on a padded first step, by hand: the drafts it embeds are a fresh slot's 0s.
* Greedy output with prefix caching on equals transformers' for V2 and V1 at PP 1 and 2,
  invariants live; V2 runs padded first steps, V1 none.
"""

import pytest
from test_greedy_equivalence import MAX_TOKENS, PROMPTS, reference  # noqa: F401 (a fixture)

from minispec import LLM, SamplingParams
from minispec.config import SchedulerConfig
from minispec.instruments.invariants import Invariant, InvariantChecker
from minispec.instruments.trace import RowPath, RowRecord, ScheduleRecord, StageRecord
from minispec.lab.explorer.coverage import Condition, Kind, conditions
from minispec.v1.core.block_pool import block_hashes
from minispec.v1.core.kv_cache_manager import KVCacheManager
from minispec.v1.core.sched.scheduler import Scheduler
from minispec.v1.outputs import ModelRunnerOutput
from minispec.v1.request import Request


def request(req_id, prompt, max_tokens=4):
    return Request(req_id, prompt, SamplingParams(temperature=0, max_tokens=max_tokens))


# -- the block pool, by hand --------------------------------------------------------------
def test_hashes_chain_over_the_prefix():
    a, b = block_hashes([1, 2, 3, 4, 5], 2, 5), block_hashes([1, 2, 3, 4], 2, 4)
    assert len(a) == 2 and a == b  # full blocks only: the 5th token is in no full block
    assert block_hashes([9, 2, 3, 4], 2, 4)[1] != a[1]  # same tokens, other parent: another block


def test_hits_ref_counts_and_eviction_by_hand():
    """Blocks of 2. A = [1, 2, 3, 4, 5] takes blocks 0-2 and names 0 and 1 (its full blocks).
    B, the same prompt, hits 0 and 1 (never its last token's block) and takes 3. A frees
    (tail first): 2, unnamed, goes to the front; B frees: 3 to the front, then 1 and 0, named,
    to the back, where they stay hittable until handed out: C = [1, 2, 7, 7, 7] hits 0 only,
    and D's four new blocks take 3, 2, 1 (evicting [1, 2, 3, 4]'s second block), 4..."""
    kv = KVCacheManager(num_blocks=8, block_size=2, enable_caching=True)
    a, b = request("A", [1, 2, 3, 4, 5]), request("B", [1, 2, 3, 4, 5])
    assert kv.get_computed_blocks(a) == []
    assert kv.allocate_slots(a, 5) == [0, 1, 2]
    assert kv.get_computed_blocks(b) == [0, 1]
    assert kv.allocate_slots(b, 1, [0, 1]) == [0, 1, 3]
    assert kv.block_pool.ref_cnt[:4] == [2, 2, 1, 1]
    kv.free(a)
    assert kv.block_pool.ref_cnt[:4] == [1, 1, 0, 1] and list(kv.block_pool.free_block_queue)[:2] == [2, 4]
    kv.free(b)
    assert list(kv.block_pool.free_block_queue) == [3, 2, 4, 5, 6, 7, 1, 0]
    assert kv.get_computed_blocks(request("C", [1, 2, 7, 7, 7])) == [0]
    assert kv.allocate_slots(request("D", [8, 8, 8, 8, 8, 8, 8]), 7) == [3, 2, 4, 5]
    assert kv.allocate_slots(request("E", [6] * 7), 7) == [6, 7, 1, 0]  # 1 and 0 evicted, last
    assert kv.get_computed_blocks(request("F", [1, 2, 3, 4, 5])) == []


def test_a_whole_prompt_of_full_blocks_still_computes_its_last_block():
    kv = KVCacheManager(num_blocks=8, block_size=2, enable_caching=True)
    kv.allocate_slots(request("A", [1, 2, 3, 4]), 4)
    assert kv.get_computed_blocks(request("B", [1, 2, 3, 4])) == [0]  # 3 tokens at most: one full block


def test_a_hit_on_a_freed_block_takes_a_free_block_too():
    kv = KVCacheManager(num_blocks=3, block_size=2, enable_caching=True)
    kv.allocate_slots(request("A", [1, 2, 3]), 3)
    kv.free(request("A", [1, 2, 3]))
    b = request("B", [1, 2, 3, 4, 5, 6])
    hits = kv.get_computed_blocks(b)
    assert hits == [0] and kv.num_free_blocks == 3
    # 7 tokens: the hit and three new blocks, four of the three free (the hit is one of them)
    assert kv.allocate_slots(b, 5, hits) is None and kv.block_pool.ref_cnt == [0, 0, 0]
    assert kv.allocate_slots(b, 3, hits) == [0, 1, 2]  # 5 tokens: the hit and two new ones


def test_without_caching_nothing_is_hit_and_blocks_free_to_the_back():
    kv = KVCacheManager(num_blocks=4, block_size=2)
    kv.allocate_slots(a := request("A", [1, 2, 3]), 3)
    kv.free(a)
    assert kv.get_computed_blocks(request("B", [1, 2, 3])) == []
    assert list(kv.block_pool.free_block_queue) == [2, 3, 1, 0]


# -- the padding rule, against vLLM 0.30.0's conditions --------------------------------------
def scheduler(k=3, budget=64, max_model_len=64, pad=True):
    return Scheduler(SchedulerConfig(8, budget, max_model_len), KVCacheManager(32, 4, enable_caching=True),
                     use_pp=False, num_spec_tokens=k, pad_spec_decode=pad)


def first_step_of_b(sched, a_prompt, b_prompt):
    """A is scheduled (its blocks named), then B arrives; B's first schedule."""
    sched.add_request(request("A", a_prompt))
    sched.schedule()
    sched.add_request(request("B", b_prompt))
    return sched.schedule()


PROMPT = [1, 2, 3, 4, 5]  # one full block of 4, then the last token


def test_a_full_hit_is_padded_to_one_plus_k_with_placeholders():
    out = first_step_of_b(scheduler(), PROMPT, PROMPT)
    assert out.num_scheduled_tokens == {"B": 4} and out.scheduled_spec_decode_tokens == {"B": [-1, -1, -1]}
    assert out.scheduled_new_reqs[0].num_computed_tokens == 4  # the hit, sent to the runner


@pytest.mark.parametrize("why,kwargs,b_prompt", [
    ("a design that takes no padded step (V1)", dict(pad=False), PROMPT),
    ("no drafts", dict(k=0), PROMPT),
    ("more than one token left", {}, [1, 2, 3, 4, 5, 6]),
    ("no room for 1 + k and the sampled token", dict(max_model_len=9), PROMPT),  # 4 + 1 + 3 + 1 = 9 fits
])
def test_where_vllm_does_not_pad(why, kwargs, b_prompt):
    out = first_step_of_b(scheduler(**kwargs), PROMPT, b_prompt)
    padded = out.scheduled_spec_decode_tokens.get("B")
    assert (padded is None) == (why != "no room for 1 + k and the sampled token"), why
    if why == "no room for 1 + k and the sampled token":  # the edge: exactly room
        out = first_step_of_b(scheduler(max_model_len=8), PROMPT, b_prompt)
        assert out.num_scheduled_tokens == {"B": 1} and "B" not in out.scheduled_spec_decode_tokens


def test_a_running_request_mid_prefill_in_the_step_stops_the_padding():
    """A's 9 tokens in chunks of 6, then 3: in A's second step (A still a prefill chunk), B's
    full hit is scheduled unpadded, one token."""
    sched = scheduler(budget=6)
    sched.add_request(request("A", PROMPT + [6, 7, 8, 9]))
    assert sched.schedule().num_scheduled_tokens == {"A": 6}
    sched.add_request(request("B", PROMPT))
    out = sched.schedule()
    assert out.num_scheduled_tokens == {"A": 3, "B": 1} and out.scheduled_spec_decode_tokens == {}


def test_a_padded_step_over_the_budget_left_waits_for_the_next_step():
    """vLLM prefers not scheduling it to scheduling it unpadded: A's decode (1 + 3 drafts) leaves
    2 of a budget of 6, and B's padded step needs 4; the step after, it gets them."""
    sched = scheduler(budget=6)
    sched.add_request(request("A", PROMPT, max_tokens=8))
    first = sched.schedule()
    sched.update_from_output(first, ModelRunnerOutput(["A"], {"A": 0}, [[7]], [[8, 9, 10]]))
    sched.add_request(request("B", PROMPT))
    assert sched.schedule().num_scheduled_tokens == {"A": 4}
    assert sched.schedule().num_scheduled_tokens == {"B": 4}  # A's batch is in flight


def test_a_one_token_prompt_beside_a_scheduled_running_request_is_padded():
    """vLLM's other branch (no computed tokens, a running request scheduled): A decodes, and B's
    prompt is one token; alone, B's first step stays one token."""
    sched = scheduler()
    sched.add_request(request("A", PROMPT, max_tokens=8))
    first = sched.schedule()
    sched.update_from_output(first, ModelRunnerOutput(["A"], {"A": 0}, [[7]], [[8, 9, 10]]))
    sched.add_request(request("B", [3]))
    out = sched.schedule()
    assert out.num_scheduled_tokens == {"A": 4, "B": 4} and out.scheduled_spec_decode_tokens["B"] == [-1] * 3
    alone = scheduler()
    alone.add_request(request("B", [3]))
    assert alone.schedule().num_scheduled_tokens == {"B": 1}


def test_a_budget_below_one_plus_k_schedules_it_unpadded():
    """minispec's departure: vLLM's request would wait for a budget it can never have."""
    out = first_step_of_b(scheduler(k=5, budget=5), PROMPT, PROMPT)
    assert out.num_scheduled_tokens == {"B": 1} and out.scheduled_spec_decode_tokens == {}


# -- invariant 2 on a padded first step, by hand ----------------------------------------------
def test_invariant_2_holds_a_padded_first_step_to_a_fresh_slots_zeros_by_hand():
    """B's first step: a full hit on [1, 2, 3, 4], its last token 5 and three placeholders. Its
    slot's previous occupant left drafts [7, 8, 9] behind: embedded, they break invariant 2; a
    cleared slot's [0, 0, 0] do not. A proposal an earlier request of the same id brought is
    forgotten when B is added (what its output brings is what later placeholders stand for)."""
    schedule = ScheduleRecord(step=3, num_scheduled_tokens={"B": 4}, scheduled_spec_decode_tokens={"B": [-1] * 3},
                              new_token_ids={}, num_computed_tokens={"B": 4}, all_token_ids={"B": PROMPT},
                              new_req_ids=["B"], num_prompt_tokens={"B": 5})

    def stage(drafts):
        row = RowRecord(row=0, req_id="B", path=RowPath.NEW, token_ids=PROMPT + drafts, num_tokens=8,
                        num_tokens_no_spec=5, num_computed_tokens=4, num_scheduled_tokens=4, num_drafts=3)
        return StageRecord(step=3, stage=0, is_last=False, rows=[row], input_ids=[5, *drafts], verified_drafts={})

    checker = InvariantChecker(raise_on_violation=False)
    checker.proposed["B"] = [7, 8, 9]  # as if another request B had proposed them
    checker.check_schedule(schedule)
    checker.check_stage(schedule, stage([0, 0, 0]))
    assert checker.violations == []
    checker.check_stage(schedule, stage([7, 8, 9]))
    (v,) = checker.violations
    assert (v.invariant, v.step, v.req_id) == (Invariant.DRAFT_AGREEMENT, 3, "B")
    assert str(v).endswith("expected draft slots [0, 0, 0], got [7, 8, 9]")


# -- greedy output with prefix caching on equals transformers' --------------------------------
FIRST = 6  # prompts run twice: the second copy, arriving later, hits the first's blocks


def run_twice(design, pp):
    llm = LLM(pipeline_parallel_size=pp, speculative_config={"method": "ngram", "num_speculative_tokens": 3},
              max_num_seqs=4, max_num_batched_tokens=96, block_size=1, max_model_len=128, model_runner=design,
              enable_prefix_caching=True, check_invariants=True, record=True)
    prompts = PROMPTS[:FIRST] * 2
    arrivals = [0] * FIRST + [4] * FIRST
    outputs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=MAX_TOKENS), arrival_steps=arrivals)
    return [o.outputs[0].token_ids for o in outputs], conditions(llm.trace, 3)


@pytest.mark.parametrize("design,pp", [("v2", 1), ("v2", 2), ("v1", 1), ("v1", 2)])
def test_greedy_with_prefix_caching_equals_transformers(reference, design, pp):
    outputs, reached = run_twice(design, pp)
    assert outputs == reference[:FIRST] * 2
    # blocks of one token: every second copy is a full hit with its last token left, a decode
    assert (Condition(Kind.NEW_WITH_DRAFTS) in reached) == (design == "v2")


def test_eagle_with_prefix_caching_is_refused():
    with pytest.raises(ValueError, match="enable_prefix_caching=True with speculative_config method='eagle3'"):
        LLM(speculative_config={"method": "eagle3", "num_speculative_tokens": 2}, enable_prefix_caching=True)
    with pytest.raises(ValueError, match="enable_prefix_caching='yes': expected True or False"):
        LLM(enable_prefix_caching="yes")
