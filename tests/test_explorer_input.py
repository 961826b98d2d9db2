"""The explorer's own faults, planted as they were found (issue 36, deliverable 6): the greedy
reference respects the KV cache's cap on a request's length; scopes that cannot run are refused
up front by the field; a fault the scope cannot reach is warned about; bad input names itself."""

import pytest

from minispec.lab.explorer.explorer import Scope, explore, for_design, schedules, search

SMALL = dict(max_requests=1, max_tokens=(4,), max_num_seqs=(4,))


def test_the_reference_stops_where_a_small_kv_cache_stops_the_request():
    # two blocks of 4: a 5-token prompt has room for 3 outputs, whatever max_tokens says;
    # the reference once asked for 4 and called a fixed design broken
    result = explore({}, Scope(num_gpu_blocks=(2,), **SMALL))
    assert result.counterexample is None and result.exhausted


@pytest.mark.parametrize("field, value, says", [
    ("num_gpu_blocks", (1,), r"num_gpu_blocks=\(1,\): \[1\] cannot hold the longest prompt \(5 tokens\)"),
    ("arrival_steps", (1, 2), r"arrival_steps=\(1, 2\): expected 0 among them"),
    ("max_tokens", 4, r"max_tokens=4: expected a non-empty tuple of integers >= 1"),
    ("pipeline_parallel_size", (2, "3"), r"pipeline_parallel_size=\(2, '3'\): expected integers >= 1"),
    ("num_speculative_tokens", (-1,), r"num_speculative_tokens=\(-1,\): expected integers >= 1"),
    ("async_scheduling", (1,), r"async_scheduling=\(1,\): expected a non-empty tuple of booleans"),
    ("enable_prefix_caching", True, r"enable_prefix_caching=True: expected a non-empty tuple of booleans"),
    ("max_requests", 2.0, r"max_requests=2.0: expected an integer >= 1"),
    ("num_gpu_blocks", (None, 0), r"num_gpu_blocks=\(None, 0\): expected integers >= 1 or None"),
])
def test_a_scope_that_cannot_run_is_refused_naming_the_field(field, value, says):
    with pytest.raises(ValueError, match=says):
        Scope(**{field: value})


def test_a_scope_that_holds_no_schedule_cannot_be_built():
    # once: arrivals (1, 2) gave no schedule and "nothing breaks"; now every scope holds one
    assert next(schedules(Scope(**SMALL)))


@pytest.mark.parametrize("call, says", [
    (lambda: explore("v2"), r"engine_args='v2': expected a dict of the design's switches"),
    (lambda: explore({}, limit=0), r"limit=0: expected None \(every schedule\) or an integer >= 1"),
    (lambda: explore({}, limit="5"), r"limit='5': expected None"),
    (lambda: explore({}, workers=True), r"workers=True: expected an integer >= 1"),
    (lambda: explore({}, {"max_requests": 1}), r"scope=\{'max_requests': 1\}: expected a Scope"),
    (lambda: search({}, max_examples=0), r"max_examples=0: expected an integer >= 1"),
    (lambda: Scope(right_drafts=(3,), num_speculative_tokens=(2,)), r"right_drafts=\(3,\): expected at most k = 2"),
])
def test_bad_input_names_what_is_wrong(call, says):
    with pytest.raises(ValueError, match=says):
        call()


def test_a_mistyped_scope_field_is_named_by_python():
    with pytest.raises(TypeError, match="max_request"):
        Scope(max_request=2)


def test_an_async_only_fault_under_a_synchronous_scope_is_warned_about():
    with pytest.warns(UserWarning, match="'v1-pp-async-column-0': its scenario runs under async scheduling"):
        result = explore({"faults": "v1-pp-async-column-0"}, Scope(**SMALL), limit=1)
    assert result.counterexample is None  # what the warning is for: a clean answer that saw nothing
    with pytest.warns(UserWarning, match="'relay-pairing': its scenario runs under 3 stages"):
        explore({"model_runner": "relay", "faults": "relay-pairing"}, Scope(**SMALL), limit=1)


def test_a_design_that_refuses_scripted_drafts_is_explored_with_its_own_by_default():
    """``explore({"model_runner": "replicated"})``, a user's first try, once raised the engine's refusal
    of scripted drafts from inside the first run; the default scope now takes the design's drafter."""
    result = explore({"model_runner": "replicated"}, limit=3, search_examples=0)
    assert result.scope.method == "ngram" and result.scope.right_drafts == (0,) and result.schedules_run == 3


def test_no_engine_args_with_a_scope_is_the_default_design():
    """``engine_args=None`` (its default) once reached the scope's check unchecked, and raised
    AttributeError there; the scope is checked against the checked dict."""
    assert explore(None, Scope(**SMALL), limit=1).schedules_run == 1


def test_a_scope_whose_drafter_the_design_refuses_is_refused_before_any_run():
    with pytest.raises(ValueError, match=r"scope.method='scripted': the design \{'model_runner': 'replicated'\} "
                                         r"drafts with 'ngram' only; explore it with for_design"):
        explore({"model_runner": "replicated"}, Scope(**SMALL))
    # an n-gram scope on a design that also takes scripted drafts is its own scope, untouched
    assert for_design(Scope(method="ngram", right_drafts=(0,), **SMALL), {"model_runner": "v1"}).method == "ngram"
