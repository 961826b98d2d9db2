"""Scheduler: token budget, chunked prefill, PP relay, rollback, preemption and resume."""

from minispec.config import SchedulerConfig
from minispec.sampling_params import SamplingParams
from minispec.v1.core.kv_cache_manager import KVCacheManager
from minispec.v1.core.sched.scheduler import Scheduler
from minispec.v1.outputs import ModelRunnerOutput
from minispec.v1.request import Request, RequestStatus


def make(num_blocks=64, budget=32, use_pp=True, max_model_len=128):
    return Scheduler(SchedulerConfig(8, budget, max_model_len), KVCacheManager(num_blocks, 4), use_pp)


def req(req_id, n, max_tokens=16):
    return Request(req_id, list(range(2, 2 + n)), SamplingParams(temperature=0, max_tokens=max_tokens))


def finish_batch(sched, out, sampled, spec=None):
    ids = list(out.num_scheduled_tokens)
    output = ModelRunnerOutput(ids, {r: i for i, r in enumerate(ids)}, [sampled.get(r, []) for r in ids],
                               [spec.get(r, []) for r in ids] if spec else [])
    return sched.update_from_output(out, output)


def test_budget_and_chunked_prefill():
    sched = make(budget=32)
    for r in (req("A", 20), req("B", 20)):
        sched.add_request(r)
    out = sched.schedule()
    assert out.num_scheduled_tokens == {"A": 20, "B": 12}  # B is chunked
    assert out.total_num_scheduled_tokens == 32
    assert sched.requests["B"].num_computed_tokens == 12  # advanced at schedule time
    out2 = sched.schedule()  # A has nothing left while in flight; B continues
    assert out2.num_scheduled_tokens == {"B": 8}
    assert out2.scheduled_cached_reqs.new_token_ids == [list(range(14, 22))]


def test_pp_relays_only_the_bonus_token_and_rollback_on_rejection():
    sched = make()
    sched.add_request(req("A", 5))
    out = sched.schedule()
    finish_batch(sched, out, {"A": [50]}, spec={"A": [60, 61, 62]})
    out = sched.schedule()
    assert out.num_scheduled_tokens == {"A": 4}
    assert out.scheduled_spec_decode_tokens == {"A": [60, 61, 62]}
    assert out.scheduled_cached_reqs.new_token_ids == [[50]]
    a = sched.requests["A"]
    assert a.num_computed_tokens == 9
    # two drafts accepted, third rejected: tokens 60, 61 and recovered 70
    finish_batch(sched, out, {"A": [60, 61, 70]}, spec={"A": [80, 81, 82]})
    assert a.num_computed_tokens == 9 - 1
    assert a.output_token_ids == [50, 60, 61, 70]
    out = sched.schedule()
    # v0.9.2: only all_token_ids[num_computed : num_computed + 1], the last token.
    assert out.scheduled_cached_reqs.new_token_ids == [[70]]


def test_drafts_that_do_not_fit_the_budget_are_trimmed():
    sched = make(budget=6)
    sched.add_request(req("A", 5))
    finish_batch(sched, sched.schedule(), {"A": [50]}, spec={"A": [60, 61, 62]})
    sched.add_request(req("B", 3))
    out = sched.schedule()
    assert out.num_scheduled_tokens == {"A": 4, "B": 2}
    sched2 = make(budget=2)
    sched2.add_request(req("A", 2))
    finish_batch(sched2, sched2.schedule(), {"A": [50]}, spec={"A": [60, 61, 62]})
    out = sched2.schedule()
    assert out.scheduled_spec_decode_tokens == {"A": [60]}


def test_preemption_and_resume():
    sched = make(num_blocks=4, budget=64)  # 16 token slots in all
    sched.add_request(req("A", 8))
    sched.add_request(req("B", 8))
    out = sched.schedule()
    finish_batch(sched, out, {"A": [9], "B": [9]})
    # Both prompts fill 2 blocks each; the sampled token needs a third block.
    out = sched.schedule()
    assert sched.num_preemptions == 1
    b = sched.requests["B"]
    assert b.status == RequestStatus.PREEMPTED and b.num_computed_tokens == 0
    assert list(out.num_scheduled_tokens) == ["A"]
    finish_batch(sched, out, {"A": [10]})
    sched.requests["A"].sampling_params.max_tokens = 2  # let A finish next step
    out = sched.schedule()
    finished = finish_batch(sched, out, {"A": [11]})
    assert [r.request_id for r in finished] == ["A"]
    out = sched.schedule()
    cached = out.scheduled_cached_reqs
    assert cached.req_ids == ["B"] and cached.resumed_from_preemption == [True]
    assert out.num_scheduled_tokens == {"B": 9}  # prompt and output recomputed
    assert cached.new_block_ids[0] == sched.kv_cache_manager.get_block_ids("B")
    assert out.finished_req_ids == {"A"}


def test_finishes_on_max_tokens_and_stop_tokens():
    sched = make()
    sched.add_request(req("A", 3, max_tokens=2))
    stop = Request("B", [2, 3], SamplingParams(temperature=0, stop_token_ids=[42]))
    sched.add_request(stop)
    finish_batch(sched, sched.schedule(), {"A": [5], "B": [6]}, spec={"A": [7, 8], "B": [42, 9]})
    out = sched.schedule()
    finished = {r.request_id: r for r in finish_batch(sched, out, {"A": [7, 8, 1], "B": [42, 9, 9]})}
    assert finished["A"].output_token_ids == [5, 7]  # truncated at max_tokens
    assert finished["B"].output_token_ids == [6, 42]
    assert finished["B"].status == RequestStatus.FINISHED_STOPPED
    assert sched.requests == {}  # finished requests leave the scheduler, as in vLLM


def test_drafts_never_run_past_max_model_len():
    sched = make(max_model_len=16)
    sched.add_request(req("A", 12, max_tokens=100))
    finish_batch(sched, sched.schedule(), {"A": [50]}, spec={"A": [1, 2, 3, 4, 5]})
    out = sched.schedule()
    # 13 tokens, 12 computed: positions 12..14 may run, so 2 of the 5 drafts
    assert out.num_scheduled_tokens == {"A": 3} and out.scheduled_spec_decode_tokens == {"A": [1, 2]}
    finished = finish_batch(sched, out, {"A": [1, 2, 9]})
    assert finished[0].num_tokens == 16 and finished[0].status == RequestStatus.FINISHED_LENGTH_CAPPED


def test_finished_ids_are_cleared_on_every_schedule():
    """As vLLM 0.9.2's ``_update_after_schedule``: each finished id travels in one
    SchedulerOutput, even an empty one; the engine hands back those it does not run."""
    sched = make()
    sched.add_request(req("A", 3, max_tokens=1))
    sched.add_request(req("B", 3))
    finish_batch(sched, sched.schedule(), {"A": [9], "B": [9]})
    assert sched.finished_req_ids == {"A"} and "A" not in sched.requests
    out = sched.schedule()
    assert out.finished_req_ids == {"A"} and out.total_num_scheduled_tokens
    assert sched.finished_req_ids == set() and sched.schedule().finished_req_ids == set()
    sched.finish_requests("B", RequestStatus.FINISHED_ABORTED)  # its batch still in flight
    empty = sched.schedule()
    assert empty.total_num_scheduled_tokens == 0 and empty.finished_req_ids == {"B"}
    assert sched.schedule().finished_req_ids == set()
    assert finish_batch(sched, out, {"B": [1]}) == []  # the aborted request's batch returns: ignored


def test_finished_requests_leave_the_scheduler_and_their_counts_stay():
    sched = make()
    for r in (req("A", 3, max_tokens=2), req("B", 3, max_tokens=2)):
        sched.add_request(r)
    finish_batch(sched, sched.schedule(), {"A": [5], "B": [6]}, spec={"A": [7], "B": [8]})
    finish_batch(sched, sched.schedule(), {"A": [7, 1], "B": [4]})
    assert sched.requests == {} and not sched.has_unfinished_requests()
    totals = sched.totals()
    assert (totals.num_output_tokens, totals.num_draft_tokens, totals.num_accepted_tokens,
            totals.num_sampling_steps) == (4, 2, 1, 4)


def test_finish_requests_takes_one_id_or_several():
    """A bare string is one request id, as in vLLM's ``finish_requests``: "10" must not
    abort requests "1" and "0"."""
    sched = make()
    for r in (req("1", 4), req("0", 4), req("10", 4)):
        sched.add_request(r)
    sched.finish_requests("10", RequestStatus.FINISHED_ABORTED)
    assert [r.request_id for r in sched.waiting] == ["1", "0"]
    assert "10" not in sched.requests and set(sched.requests) == {"1", "0"}
    sched.finish_requests(["1", "0"], RequestStatus.FINISHED_ABORTED)
    assert not sched.waiting and sched.finished_req_ids == {"1", "0", "10"}


def test_preempt_during_execution():
    """vLLM's own test, re-expressed (vLLM 0.30.0 sdist, ``tests/v1/core/test_scheduler.py``
    1194-1250, from reading it): a request whose batch is still running is preempted, and the
    output of that batch still reaches it. 10 blocks of 16 slots (vLLM asks for 11: its block
    0 is the null block), two 80-token prompts of 5 blocks each, a budget of 100."""
    sched = Scheduler(SchedulerConfig(8, 100, 128), KVCacheManager(10, 16), use_pp=False)
    first, second = req("0", 80), req("1", 80)
    sched.add_request(first)
    out0 = sched.schedule()
    assert list(out0.num_scheduled_tokens) == ["0"] and len(out0.scheduled_new_reqs[0].block_ids) == 5
    # While out0 is in flight (max_concurrent_batches > 1: pipeline parallelism), the second
    # request takes the other 5 blocks.
    sched.add_request(second)
    out1 = sched.schedule()
    assert list(out1.num_scheduled_tokens) == ["1"] and len(out1.scheduled_new_reqs[0].block_ids) == 5
    finish_batch(sched, out0, {"0": [0]})
    # The first request's 81st token needs a sixth block; the only victim is the second
    # request, whose batch out1 is still running.
    sched.schedule()
    assert sched.running == [first]
    assert second.status == RequestStatus.PREEMPTED
    finish_batch(sched, out1, {"1": [42]})
    # The preempted request keeps what its batch in flight sampled.
    assert second.output_token_ids == [42]


def test_a_preempted_request_resumes_once_its_stale_output_is_in():
    """Resuming while the output is in flight could sample a position that output brings (vLLM
    0.30.0 ``vllm/v1/core/sched/scheduler.py`` 886-895): the request waits for it, later waiting
    requests do not."""
    sched = Scheduler(SchedulerConfig(8, 100, 128), KVCacheManager(10, 16), use_pp=True)
    first, second, third = req("A", 80), req("B", 80), req("C", 8)
    sched.add_request(first)
    out0 = sched.schedule()
    sched.add_request(second)
    out1 = sched.schedule()
    finish_batch(sched, out0, {"A": [0]})
    sched.add_request(third)
    out2 = sched.schedule()  # preempts B (in flight); waiting requests wait for the next step
    assert second.status == RequestStatus.PREEMPTED and out2.preempted_req_ids == {"B"}
    assert second.num_stale_output_tokens == 80
    finish_batch(sched, out2, {"A": [1]})
    out3 = sched.schedule()  # B's output is still in flight: C goes first
    assert "B" not in out3.num_scheduled_tokens and "C" in out3.num_scheduled_tokens
    finish_batch(sched, out1, {"B": [42]})  # delivered stale: the counts stay reset
    assert (second.output_token_ids, second.num_computed_tokens, second.num_stale_output_tokens) == ([42], 0, 0)
    assert second.spec_token_ids == []
    first.sampling_params.max_tokens = 2
    finish_batch(sched, out3, {"A": [2], "C": [7]})  # A finishes, its blocks are free
    out4 = sched.schedule()
    cached = out4.scheduled_cached_reqs
    i = cached.req_ids.index("B")
    assert cached.resumed_from_preemption[i] and out4.num_scheduled_tokens["B"] == 81  # its 42 recomputed
    assert cached.new_token_ids[i] == list(range(2, 82)) + [42]


def test_a_stale_output_takes_back_nothing_under_async_scheduling():
    """PR #48245's case: the async scheduler's placeholders were zeroed by the preemption, so the
    stale output (two of three drafts accepted) must not take them, nor the rejected draft, back."""
    from minispec.v1.core.sched.async_scheduler import AsyncScheduler

    sched = AsyncScheduler(SchedulerConfig(8, 100, 128, async_scheduling=True), KVCacheManager(6, 16),
                           use_pp=False, num_spec_tokens=3)
    first, second = req("A", 48), req("B", 48)
    for r in (first, second):
        sched.add_request(r)
    out0 = sched.schedule()  # both prefill (3 + 3 blocks): the cache is full
    out1 = sched.schedule()  # on placeholders: A needs a fourth block, B goes with two batches in flight
    assert second.status == RequestStatus.PREEMPTED and second.num_output_placeholders == 0
    assert second.num_stale_output_tokens == 48
    finish_batch(sched, out0, {"A": [5], "B": [6]})
    assert (second.output_token_ids, second.num_computed_tokens, second.num_output_placeholders) == ([6], 0, 0)
    finish_batch(sched, out1, {"A": [7, 8, 9, 1]})
    assert first.num_output_placeholders == 0 and first.output_token_ids == [5, 7, 8, 9, 1]


def test_a_stale_output_that_stops_the_request_finishes_it_from_waiting():
    sched = Scheduler(SchedulerConfig(8, 100, 128), KVCacheManager(10, 16), use_pp=True)
    first, second = req("A", 80), req("B", 80, max_tokens=1)
    sched.add_request(first)
    out0 = sched.schedule()
    sched.add_request(second)
    out1 = sched.schedule()
    finish_batch(sched, out0, {"A": [0]})
    sched.schedule()
    assert second in sched.waiting
    finished = finish_batch(sched, out1, {"B": [42]})
    assert finished == [second] and second.status == RequestStatus.FINISHED_LENGTH_CAPPED
    assert second not in sched.waiting and "B" not in sched.requests


def test_a_preempted_request_that_finishes_before_the_word_goes_out_is_only_finished():
    """An empty schedule's preemptions are handed back for the next one (``EngineCore``); if the
    request is aborted meanwhile, the stages hear only that it finished (Model Runner V2 would
    otherwise keep a preempted request it has already dropped)."""
    sched = Scheduler(SchedulerConfig(8, 100, 128), KVCacheManager(10, 16), use_pp=True)
    first, second = req("A", 80), req("B", 80)
    sched.add_request(first)
    out0 = sched.schedule()
    sched.add_request(second)
    sched.schedule()
    finish_batch(sched, out0, {"A": [0]})
    out2 = sched.schedule()
    sched.preempted_req_ids |= out2.preempted_req_ids  # as if it had not gone out
    sched.finish_requests("B", RequestStatus.FINISHED_ABORTED)
    out3 = sched.schedule()
    assert out3.preempted_req_ids == set() and out3.finished_req_ids == {"B"}
