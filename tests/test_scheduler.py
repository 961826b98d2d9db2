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
