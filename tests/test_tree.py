"""Trees of drafts (``speculative_token_tree``): the format, tree attention, greedy verification,
the accepted path's compaction on every stage, and invariant 10 with its planted fault."""

from __future__ import annotations

import pytest
import torch

from minispec import LLM, SamplingParams
from minispec.config import CHECKPOINT_DIR, LlamaArchitecture, SpeculativeConfig
from minispec.instruments.invariants import Invariant, InvariantChecker, InvariantViolation, scheduled_view
from minispec.instruments.trace import RowPath, RowRecord, ScheduleRecord, StageRecord
from minispec.model_executor.models.standin import greedy_continuation
from minispec.token_tree import TokenTree

STANDIN = CHECKPOINT_DIR / "standin"
ARCH = LlamaArchitecture.from_pretrained(STANDIN, "model")
TREE = "[(0,), (1,), (0, 0), (1, 0), (1, 1)]"  # two children of the root, each with children
PROMPTS = [[5, 9, 3, 7], [11, 2, 8]]
SCRIPT = {"0": (1, 2, 0, 2), "1": (2, 1, 2)}  # right nodes along the path through the youngest children


def spec(tree: str = TREE, **more) -> dict:
    return {"method": "scripted", "speculative_token_tree": tree, "script": SCRIPT, **more}


def run(design: str, pp: int, async_scheduling: bool = False, faults=None, tree: str = TREE, max_tokens: int = 10):
    llm = LLM(model=STANDIN, pipeline_parallel_size=pp, model_runner=design, faults=faults,
              async_scheduling=async_scheduling, speculative_config=spec(tree), check_invariants=True)
    outs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=max_tokens))
    return [o.outputs[0].token_ids for o in outs], llm


# -- the format ---------------------------------------------------------------------------
def test_the_tree_is_vllm_s_string_sorted_breadth_first_and_its_size_is_k():
    s = SpeculativeConfig.from_dict({"method": "draft_model", "speculative_token_tree": "[(1,), (0, 0), (0,)]"})
    assert s.token_tree.choices == ((0,), (1,), (0, 0)) and s.num_speculative_tokens == 3
    assert s.token_tree.parents == (-1, -1, 0)
    assert SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": 3}).token_tree == TokenTree.chain(3)
    assert str(TokenTree.chain(3)) == "[(0,), (0, 0), (0, 0, 0)]"  # vLLM 0.17.0's default chain


@pytest.mark.parametrize("tree,expected", [
    ("[(0,), (2,)]", "children numbered from 0: (2,) has no elder sibling (1,)"),
    ("[(0, 0)]", "every node's parent in the tree: (0, 0) has no (0,)"),
    ("[(0,), (0,)]", "each node once"),
    ("[]", "a non-empty list of tuples"),
    ("[(0,), (-1,)]", "tuples of integers >= 0"),
    ("(0,", "a Python list of tuples of child indices"),
    ([(0,)], "a string of a Python list of tuples"),
])
def test_a_malformed_tree_is_refused_naming_the_parameter(tree, expected):
    with pytest.raises(ValueError, match=r"^speculative_config\['speculative_token_tree'\]=.*expected " + _re(expected)):
        SpeculativeConfig.from_dict({"method": "draft_model", "speculative_token_tree": tree})


def _re(text: str) -> str:
    import re
    return re.escape(text)


def test_k_must_match_the_tree_and_n_gram_cannot_branch():
    with pytest.raises(ValueError, match=r"num_speculative_tokens'\]=3: expected the speculative_token_tree's 2 nodes"):
        SpeculativeConfig.from_dict({"method": "draft_model", "num_speculative_tokens": 3,
                                     "speculative_token_tree": "[(0,), (1,)]"})
    with pytest.raises(ValueError, match="with method='ngram': n-gram lookup has one continuation per match"):
        SpeculativeConfig.from_dict({"method": "ngram", "speculative_token_tree": "[(0,), (1,)]"})
    # a chain is what every proposer drafts
    assert SpeculativeConfig.from_dict({"method": "ngram", "speculative_token_tree": "[(0,), (0, 0)]"}).enabled


def test_a_design_whose_stages_cannot_learn_the_path_refuses_a_tree():
    with pytest.raises(ValueError, match=r"model_runner='v1' learns the accepted drafts under synchronous pipeline "
                                         r".*expected model_runner in \['v2', 'relay'\]"):
        LLM(model=STANDIN, pipeline_parallel_size=2, model_runner="v1", speculative_config=spec())


def test_a_tree_with_random_sampling_is_refused_before_anything_runs():
    llm = LLM(model=STANDIN, model_runner="v2", speculative_config=spec())
    with pytest.raises(ValueError, match=r"^temperature=0.8 with speculative_token_tree=.*verified greedily only"):
        llm.generate(PROMPTS, SamplingParams(temperature=0.8, max_tokens=4))
    assert llm.generate(PROMPTS[:1], SamplingParams(temperature=0, max_tokens=4))[0].outputs[0].token_ids == \
        greedy_continuation(PROMPTS[0], 4, ARCH)


# -- attention and verification -----------------------------------------------------------
def test_each_node_sees_the_context_its_ancestors_and_itself():
    mask = TokenTree.parse(TREE).ancestor_mask(5).int().tolist()
    assert mask == [[1, 0, 0, 0, 0, 0],   # the root
                    [1, 1, 0, 0, 0, 0],   # (0,)
                    [1, 0, 1, 0, 0, 0],   # (1,)
                    [1, 1, 0, 1, 0, 0],   # (0, 0)
                    [1, 0, 1, 0, 1, 0],   # (1, 0)
                    [1, 0, 1, 0, 0, 1]]   # (1, 1)


def test_greedy_verification_takes_the_longest_path_the_target_agrees_with():
    tree = TokenTree.parse(TREE)
    drafts = [10, 20, 30, 40, 50]  # (0,), (1,), (0, 0), (1, 0), (1, 1)
    # the target: 20 at the root, 50 after (1,), 77 after (1, 1): path (1,), (1, 1), then the bonus 77
    target = [20, 0, 50, 0, 0, 77]
    assert tree.verify_greedy(drafts, target) == ([1, 4], [20, 50, 77])
    assert tree.verify_greedy(drafts, [99, 0, 0, 0, 0, 0]) == ([], [99])  # nothing agrees: the root's token
    assert tree.path_of(drafts, [20, 50]) == [1, 4]  # what a stage derives from the tokens alone


def test_tree_attention_in_the_target_matches_the_path_run_as_a_chain():
    """The Llama target: a node's logits under the tree mask equal those of its path run alone."""
    from minispec.attention import make_attention_metadata
    from minispec.config import DEFAULT_TARGET
    from minispec.model_executor.model_loader import get_model
    from minispec.v1.worker.utils import bind_kv_cache

    arch = LlamaArchitecture.from_pretrained(DEFAULT_TARGET, "model")
    model = get_model(DEFAULT_TARGET, 0, 1, device="cpu", dtype=torch.float32, arch=arch)
    bind_kv_cache(model, 8, 4, torch.float32, "cpu")
    tree, context = TokenTree.parse(TREE), [5, 9, 3, 7]
    drafts = [11, 12, 13, 14, 15]
    blocks = torch.arange(8)[None, :]
    positions, meta = make_attention_metadata([0], [len(context) + 5], blocks, 4, "cpu", tree, [5])
    assert positions.tolist()[-6:] == [3, 4, 4, 5, 5, 5]
    tree_logits = model.compute_logits(model(torch.tensor(context + drafts), positions, meta))
    path = [1, 4]  # (1,), (1, 1)
    chain = context + [drafts[i] for i in path]
    positions, meta = make_attention_metadata([0], [len(chain)], blocks, 4, "cpu")
    chain_logits = model.compute_logits(model(torch.tensor(chain), positions, meta))
    torch.testing.assert_close(tree_logits[[len(context) + i for i in path]], chain_logits[-2:])


# -- invariant 10 ---------------------------------------------------------------------------
def test_invariant_10_by_hand():
    """Prompt [5, 9, 3] (root 3 at position 2) ran the tree [(0,), (1,)] as drafts [7, 8] in slots
    3 and 4; the target took (1,): 8, then the bonus 6. The scheduler's tokens are [5, 9, 3, 8, 6]
    and 4 are committed. Compacted, position 3 holds (8, 3); left as it was, (7, 3): a rejected
    sibling, which invariant 10 names."""
    schedule = ScheduleRecord(step=1, num_scheduled_tokens={"A": 1}, scheduled_spec_decode_tokens={},
                              new_token_ids={}, num_computed_tokens={"A": 4}, all_token_ids={"A": [5, 9, 3, 8, 6]},
                              new_req_ids=[], num_prompt_tokens={"A": 3})

    def stage(kv_tokens):
        row = RowRecord(row=0, req_id="A", path=RowPath.STAYED, token_ids=[5, 9, 3, 8, 6], num_tokens=5,
                        num_tokens_no_spec=5, num_computed_tokens=4, num_scheduled_tokens=1, num_drafts=0,
                        kv_token_ids=kv_tokens, kv_positions=[0, 1, 2, 3])
        return StageRecord(step=1, stage=0, is_last=False, rows=[row], input_ids=[6], verified_drafts={})

    checker = InvariantChecker(raise_on_violation=False)
    checker.check_stage(schedule, stage([5, 9, 3, 8]))
    assert checker.violations == []
    checker.check_stage(schedule, stage([5, 9, 3, 7]))
    (v,) = checker.violations
    assert (v.invariant, v.step, v.stage, v.req_id) == (Invariant.COMMITTED_KV, 1, 0, "A")
    assert str(v).endswith("expected KV at position 3: token 8 stored at 3, got token 7 stored at 3")
    assert scheduled_view(schedule, "A", []).all_token_ids == [5, 9, 3, 8, 6]


@pytest.mark.parametrize("design", ["v2", "relay"])
@pytest.mark.parametrize("pp", [2, 3])
def test_tree_path_not_compacted_breaks_invariant_10_on_a_non_last_stage(design, pp):
    with pytest.raises(InvariantViolation) as caught:
        run(design, pp, faults="tree-path-not-compacted")
    v = caught.value.violation
    assert (v.invariant, v.stage, v.req_id) == (Invariant.COMMITTED_KV, 0, "req-0")


def test_tree_path_not_compacted_is_masked_at_one_stage():
    """One stage is the last: it compacts (as SGLang's last stage does) and nothing breaks."""
    assert run("v2", 1, faults="tree-path-not-compacted")[0] == [greedy_continuation(p, 10, ARCH) for p in PROMPTS]


# -- greedy equality ------------------------------------------------------------------------
CASES = [(d, pp, a) for d in ("v1", "v2", "relay") for pp in (1, 2, 3) for a in (False, True)
         if not (d == "v1" and pp > 1 and not a)]


@pytest.mark.parametrize("design,pp,async_scheduling", CASES)
def test_a_tree_keeps_greedy_output_with_invariants_live(design, pp, async_scheduling):
    outputs, llm = run(design, pp, async_scheduling)
    assert outputs == [greedy_continuation(p, 10, ARCH) for p in PROMPTS]


# -- the Llama target with the draft model: equal to transformers ---------------------------
from test_greedy_equivalence import PROMPTS as TEXTS  # noqa: E402
from test_greedy_equivalence import reference  # noqa: E402, F401  (the fixture: transformers' greedy generate)

DRAFT_TREE = "[(0,), (1,), (0, 0), (1, 0), (0, 0, 0)]"
LLAMA_CASES = [(d, pp, a) for d in ("v2", "relay", "v1") for pp in (1, 2, 3) for a in (False, True)
               if not (d == "v1" and pp > 1 and not a)]


@pytest.mark.parametrize("design,pp,async_scheduling", [
    pytest.param(*case, marks=[] if case in {("v2", 2, False), ("relay", 3, True), ("v1", 2, True)}
                 else [pytest.mark.slow]) for case in LLAMA_CASES])
def test_a_drafted_tree_equals_transformers_greedy_generate(reference, design, pp, async_scheduling):  # noqa: F811
    llm = LLM(pipeline_parallel_size=pp, model_runner=design, async_scheduling=async_scheduling,
              speculative_config={"method": "draft_model", "speculative_token_tree": DRAFT_TREE},
              max_num_seqs=16, max_num_batched_tokens=96, block_size=8, num_gpu_blocks=64, check_invariants=True)
    outputs = llm.generate(TEXTS, SamplingParams(temperature=0, max_tokens=40), arrival_steps=[i // 4 for i in range(16)])
    assert [o.outputs[0].token_ids for o in outputs] == reference
    stats = llm.stats()
    assert stats["preemptions"] > 0 and stats["accepted_tokens"] > 0  # preempted, and the tree accepted drafts
