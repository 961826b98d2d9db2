"""Every GitHub pull request and issue the repository cites, once: ``THREADS``.

Each ``Thread`` holds what the repository relies on: its number and repository, its title,
its state when it was last checked (``CHECKED``), the posts cited (``Post``: its kind, its
date, the sentences quoted from it), how that was verified (``Verified``, with a note where
the check could not settle everything). The fault presets (``minispec.lab.faults.catalogue``)
and the timeline (``minispec.lab.faults.pp_sync``) take their references from here, as
``Thread`` and ``Citation`` objects looked up by number (``thread``): a post or a quote
the table does not hold cannot be cited. Prose (docstrings, comments, notebooks, the
README, docs) cites by number; ``tests/test_threads.py`` fails on a reference anywhere
that is not here, on an entry nothing cites, and on a date or a quoted sentence next to
a reference in prose that the table does not hold for that thread.

The threads were read in a stored index of GitHub threads (pull requests and issues of
vLLM, SGLang, vllm-ascend and others), which holds each thread's posts as excerpts with
their dates, and found again on ``CHECKED`` with the search tool over that index, which
returns one excerpt of a thread per hit; where a post could not be found again, the entry is
``PARTLY`` verified and its note says which. Two threads are cited without being read
(``CITED_IN_SOURCE``, ``NOT_READ``).

vLLM twin: none (references, not code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from enum import StrEnum

CHECKED = date(2026, 12, 2)  # when every state below was read, and every post found again
VLLM = "vllm-project/vllm"
SGLANG = "sgl-project/sglang"
_PROJECTS = {VLLM: "vLLM", SGLANG: "SGLang", "vllm-project/vllm-ascend": "vllm-ascend",
             "jupyterlab/jupyterlab": "JupyterLab", "vllm-project/vllm-gaudi": "vllm-gaudi",
             "tenstorrent/vllm-tt-plugin": "vllm-tt-plugin"}


class ThreadKind(StrEnum):
    PULL = "pull"
    ISSUE = "issues"  # as GitHub's URL spells it


class ThreadState(StrEnum):
    MERGED = "merged"
    OPEN = "open"
    CLOSED = "closed"
    NOT_READ = "not read"  # the thread itself was not read (see Verified)


class Verified(StrEnum):
    SEARCHED = "every post listed found again with the search tool (corpus issues) on CHECKED"
    PARTLY = ("its title and state found again with the search tool on CHECKED, not every post listed (the tool "
              "returns excerpts): see the entry's note")
    TITLE = "its title and state read in the stored index; no post of it is quoted"
    CITED_IN_SOURCE = "not read; cited in vLLM's own source"
    NOT_READ = "not read: not a vLLM thread, cited for a JupyterLab behaviour seen in use"


class PostKind(StrEnum):
    DESCRIPTION = "description"
    COMMENT = "comment"
    REVIEW = "review"


@dataclass(frozen=True)
class Post:
    """One post of a thread the repository cites: when, and the sentences it quotes from it."""

    kind: PostKind
    posted: date
    quotes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Thread:
    repo: str  # "owner/name"
    number: int
    kind: ThreadKind
    title: str  # "" where the index does not hold the thread
    state: ThreadState
    verified: Verified
    posts: tuple[Post, ...] = ()  # the posts cited, earliest first
    note: str = ""  # what the verification could not settle, or where the code it changed was read

    def __post_init__(self):
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", self.repo) or self.number <= 0:
            raise ValueError(f"Thread({self.repo!r}, {self.number}): expected 'owner/name' and a positive number")
        if self.verified in (Verified.SEARCHED, Verified.PARTLY) and not (self.title and self.posts):
            raise ValueError(f"{self.label}: found with the search tool, so its title and a post are expected")
        if self.posts and not self.title:
            raise ValueError(f"{self.label}: a post is listed, so the thread was read: its title is expected")
        if [p.posted for p in self.posts] != sorted(p.posted for p in self.posts):
            raise ValueError(f"{self.label}: posts are listed earliest first")

    @property
    def label(self) -> str:
        prefix = "" if self.repo == VLLM else self.repo.split("/")[1] + " "
        return f"{prefix}#{self.number}"

    @property
    def name(self) -> str:
        """How prose names it: "vLLM PR #50514", "vLLM RFC #44697", "vllm-ascend PR #15171"."""
        kind = "RFC" if self.title.startswith("[RFC]") else "PR" if self.kind is ThreadKind.PULL else "issue"
        return f"{_PROJECTS.get(self.repo, self.repo)} {kind} #{self.number}"

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{self.kind}/{self.number}"

    @property
    def posted(self) -> date | None:
        """The date of its earliest post cited."""
        return self.posts[0].posted if self.posts else None

    @property
    def quotes(self) -> tuple[str, ...]:
        return tuple(q for p in self.posts for q in p.quotes)

    def post(self, posted: date) -> Post:
        for p in self.posts:
            if p.posted == posted:
                return p
        raise KeyError(f"{self.label} has no post of {posted} in THREADS (it lists {[str(p.posted) for p in self.posts]})")


@dataclass(frozen=True)
class Citation:
    """What the repository says of a thread, drawn from the table: the thread, the post
    cited (by its date; ``None``: the thread as a whole), a sentence quoted from that post
    (the whole of one of its quotes, or a part), and what it is cited for, in the
    repository's own words. A post or quote the table does not hold is a ``KeyError``."""

    thread: Thread
    posted: date | None = None
    quote: str = ""
    role: str = ""

    def __post_init__(self):
        if self.posted is None and self.quote:
            raise ValueError(f"Citation of {self.thread.label}: a quote needs the post it is from (posted=)")
        if self.posted is not None:
            post = self.thread.post(self.posted)
            if self.quote and not any(self.quote in q for q in post.quotes):
                raise KeyError(f"{self.thread.label}'s {post.kind} of {post.posted} has no quote containing "
                               f"{self.quote!r} in THREADS")

    def render(self) -> str:
        said = f"{self.thread.name} ({self.thread.state}"
        if self.posted is not None:
            post = self.thread.post(self.posted)
            said += f"; its {post.kind} of {post.posted}" + (f": \"{self.quote}\"" if self.quote else "")
        return said + ")" + (f": {self.role}" if self.role else "")


def _vllm(number, kind, title, state, posts=(), verified=Verified.SEARCHED, note="") -> Thread:
    return Thread(VLLM, number, kind, title, state, verified, posts, note)


P, I = ThreadKind.PULL, ThreadKind.ISSUE
MERGED, OPEN, CLOSED = ThreadState.MERGED, ThreadState.OPEN, ThreadState.CLOSED
DESCRIPTION, COMMENT, REVIEW = PostKind.DESCRIPTION, PostKind.COMMENT, PostKind.REVIEW

THREADS: tuple[Thread, ...] = (
    _vllm(13339, P, "[V1] Get input tokens from scheduler", MERGED,
          (Post(DESCRIPTION, date(2025, 2, 15), (
              "This change is especially useful when the token IDs are not generated by the model runner "
              "(e.g., non-last ranks in PP).",)),)),
    _vllm(18019, I, "", ThreadState.NOT_READ, verified=Verified.CITED_IN_SOURCE,
          note="0.9.2 vllm/v1/worker/gpu_model_runner.py 1394 cites it"),
    _vllm(20247, I, "[Bug]: Scheduler and GPUModelRunner have inconsistent output_token_ids when speculative "
          "decoding is enabled", OPEN, verified=Verified.TITLE),
    _vllm(20291, P, "[Optimization] Cache sampled token ids in model runner", MERGED,
          (Post(DESCRIPTION, date(2025, 7, 1), (
              "As a result, the scheduler no longer needs to send new token IDs unless PP is being used.",)),)),
    _vllm(20530, P, "[BugFix][Spec Decode] Fix spec token ids in model runner", MERGED,
          (Post(DESCRIPTION, date(2025, 7, 6), (
              "Fixes a bug in spec decoding introduced in #20291, where `token_ids_cpu` wasn't properly updated "
              "because draft token IDs were incorrectly gated by `if not last_rank`.",)),)),
    _vllm(24322, P, "feat: spec decode with draft models", MERGED, verified=Verified.TITLE),
    _vllm(26385, P, "[BugFix] Fix async scheduling + request preemption", MERGED,
          (Post(DESCRIPTION, date(2025, 10, 7), (
              "Ensure model runner is refreshed with all request token ids following preemption, so that correct "
              "input ids are used.",)),)),
    _vllm(31944, P, "[BugFix] Fix spec decoding edge case bugs", MERGED,
          (Post(DESCRIPTION, date(2026, 1, 8), (
              "The \"paused\" request may still have valid drafted spec tokens but these aren't properly handled "
              "upon resumption in the model runner `_update_states` method since they are treated as new requests "
              "and the spec token handling isn't on that path.",)),),
          note="found with the search tool on 2026-12-07 (once listed as not in the index): its description's second "
               "point is fix 1, which 0.14.0 vllm/v1/worker/gpu_model_runner.py 1061-1063 shows"),
    _vllm(32618, P, "[Feature] Fully support for async scheduling + PP, 30.8% E2E throughput improvement, 31.8% "
          "TPOT improvement", MERGED,
          (Post(REVIEW, date(2026, 1, 19), ("use token ids broadcast from the last PP stage",)),),
          note="the quote is a comment in the diff its review of 2026-01-19 discusses; the broadcast itself is "
               "read in 0.30.0 vllm/v1/core/sched/scheduler.py 1633-1636, from reading the code"),
    _vllm(33960, P, "[Core] Pipeline Parallel support for Model Runner V2", MERGED,
          (Post(DESCRIPTION, date(2026, 2, 6), ("This introduces a modular `PPHandler` class that encapsulates all "
                                                "PP logic",)),)),
    _vllm(39833, P, "[MRv2]fix: model accuracy regression caused by reusing the stale last_sampled_tokens and "
          "draft_tokens", MERGED,
          (Post(DESCRIPTION, date(2026, 4, 14), (
              "Fix ~13% GSM8K accuracy regression in PD disaggregation caused by stale `last_sampled_tokens` and "
              "`draft_tokens` leaking between requests when V2 model runner reuses request state slots",)),)),
    _vllm(41133, P, "[Bugfix] Fix token loss in PP mode which causes degraded accuracy", MERGED,
          (Post(DESCRIPTION, date(2026, 4, 28), (
              "The current PP mode causes degraded accuracy with concurrent requests.",
              "However, in `_update_states` with PP mode, the above code incorrectly updates it to "
              "`num_computed_tokens`.",
              "In async-scheduling, `new_token_ids` is empty, so `token_ids_cpu` not touched.")),),
          note="its description's gsm8k table (Qwen3-8B, strict-match): TP 0.8741; PP 2 0.8324; "
               "PP 2 + no-async-scheduling 0.8757"),
    _vllm(42187, P, "[ModelRunnerV2] Avoid pipeline parallel bubbles", MERGED,
          (Post(DESCRIPTION, date(2026, 5, 9), (
              "Reorganize PP scheduling and broadcast of sampled tokens so that pipelining works properly for decode "
              "and (chunked) prefill.",)),
           Post(REVIEW, date(2026, 5, 9), ("The `not_finishing` condition is off-by-one.",)),
           Post(REVIEW, date(2026, 5, 27), (
               "in the deferred postprocessing (once we know the accepted and rejected counts), we just need to "
               "subtract the rejected count",))),
          note="the review of 2026-05-09 is an automated reviewer's; the post of 2026-05-27 is its author's reply in "
               "a review thread (found on 2026-12-07): the computed tokens advance by the whole query at once and the "
               "deferred postprocessing takes the rejected drafts back, which is what V2's giving them back by "
               "design rests on"),
    _vllm(44697, I, "[RFC]: MTP speculative decoding under pipeline parallelism (PP>1)", OPEN,
          (Post(DESCRIPTION, date(2026, 6, 5), (
              "There's one invariant behind all of it: the non-last PP rank should apply the sampler's broadcast "
              "per-request valid/accepted count to its own",)),
           Post(COMMENT, date(2026, 6, 29))),
          verified=Verified.PARTLY,
          note="the comment of 2026-06-29 (it lists the sampled-token broadcast width second, after DeepSeekMTP's "
               "missing SupportsPP) was read in the index by an earlier check; the search did not return it again"),
    _vllm(44698, P, "[Spec][PP] Support MTP speculative decoding under pipeline parallelism (PP>1)", OPEN,
          (Post(DESCRIPTION, date(2026, 6, 5), ("Implements the design in #44697",)),)),
    _vllm(46595, P, "[Bugfix][MooncakeStore] track resumed requests via scheduler's resumed_req_ids", MERGED,
          (Post(DESCRIPTION, date(2026, 6, 24), (
              "The MooncakeStore connector tracks block tables per request so it knows whether a step's "
              "`new_block_ids` should be **appended** (normal decode) or **replace** the existing table (resumed "
              "from preemption).",)),)),
    _vllm(46994, P, "[Spec][V2] Support MTP speculative decoding under pipeline parallelism", MERGED,
          (Post(DESCRIPTION, date(2026, 6, 29), (
              "this PR covers the MTP-specific gaps that remain on the PP>1 path",)),
           Post(COMMENT, date(2026, 7, 7)),
           Post(COMMENT, date(2026, 9, 1), ("NCCL does not negotiate element counts",
                                            "draft tokens never reach non-last ranks",
                                            "Padding the source to `max_sample_len` with `-1` fixed it for us"))),
          note="its description (2026-06-29) was returned by the search on 2026-12-07; the comment of 2026-09-01 numbers "
               "the faults as its fixes #2 and #3"),
    _vllm(49620, P, "fix(v1): prevent IMA after speculative preemption", OPEN,
          (Post(DESCRIPTION, date(2026, 7, 23), (
              "a request can be preempted after a speculative decode frame has been dispatched but before its output "
              "returns",)),)),
    _vllm(50514, P, "[Core][MRV2] Support eagle3 spec decode with pipeline parallel", MERGED,
          (Post(DESCRIPTION, date(2026, 7, 31), (
              "broadcast draft proposals from the last stage so earlier stages embed the correct token IDs on the "
              "next step",
              "use one fixed sampled-token broadcast width on every rank",
              "Each stage adds the states it produces to the existing `IntermediateTensors` handoff using globally "
              "ordered slots.")),
           Post(COMMENT, date(2026, 8, 4)),
           Post(REVIEW, date(2026, 8, 5), ("I think we should use the filtered idex_mapping instead of this "
                                           "unfiltered one.",))),
          verified=Verified.PARTLY,
          note="its description (yongqinwang-cmd, 2026-07-31) was returned by the search on 2026-12-07 (query: its "
               "title): the draft broadcast, the fixed width and the taps carried in `IntermediateTensors` are its "
               "own words; the comment of 2026-08-04 (a TP8 x PP2 hardware validation) and a review of 2026-08-21 "
               "were returned by earlier searches; the review of 2026-08-05 an earlier check quoted was not found "
               "again; what it changed is read in 0.30.0 vllm/v1/worker/gpu/pp_utils.py (absent in 0.29.0), and "
               "run in make vllm-check (reference/v2_run.py)"),
    _vllm(52071, I, "[Bug]: speculative decoding under pipeline parallelism produces wrong output with "
          "--no-async-scheduling", OPEN,
          (Post(DESCRIPTION, date(2026, 8, 12), (
              "With `--no-async-scheduling`, speculative decoding under pipeline parallelism produces wrong "
              "output — or a CUDA fault — instead of being rejected or working.",)),)),
    _vllm(52179, P, "[Bugfix] Fix PP speculative decode cadence with sync scheduling", OPEN,
          (Post(DESCRIPTION, date(2026, 8, 13), (
              "When using the V2 model runner with pipeline parallelism and speculative decoding, the base "
              "`Scheduler` can schedule a request again before the sampled token from the previous PP step has been "
              "relayed back.",)),)),
    _vllm(52295, P, "[MRv2][Bugfix] Sync speculative draft tokens across PP ranks", OPEN,
          (Post(DESCRIPTION, date(2026, 8, 14), (
              "In Model Runner V2, speculative proposal runs only on the last pipeline rank. The resulting next-step "
              "draft tokens are written to that rank's request state, but the non-last ranks keep stale or "
              "zero-initialized draft tokens.",)),)),
    _vllm(53402, I, "[deepseek-v4-flash-sm86 fork] PP8 + DSpark: recurring deadlock in the V2-runner PP sampled-token/"
          "draft broadcast protocol (PPHandler)", CLOSED,
          (Post(COMMENT, date(2026, 8, 23), (
              "NCCL flight-recorder dumps show receivers enqueued draft-broadcast seq N+1 while the last rank was "
              "still at N",)),),
          note="the comment quoted is its author's"),
    _vllm(53577, P, "[DSpark] Support pipeline-parallel targets in disaggregated and aggregated serving (+ padded graph "
          "batch safety)", CLOSED, (Post(DESCRIPTION, date(2026, 8, 24)),)),
    _vllm(53052, P, "[Feature] Support EAGLE3 for Sarvam", MERGED,
          (Post(REVIEW, date(2026, 9, 4), (
              "When a requested layer is on a non-final pipeline stage, this list is populated but discarded by the "
              "`IntermediateTensors` return",)),),
          note="the review quoted is an automated reviewer's, on sarvam.py's forward"),
    _vllm(54260, I, "[Bug]: PP + async scheduling + spec decode: output_token_ids trim only runs on the last PP rank, "
          "desynchronizing the ranks until NCCL deadlocks", OPEN,
          (Post(DESCRIPTION, date(2026, 8, 28), ("The trim branch is an `elif`, so it only ever executes on the last "
                                                 "PP rank.",
                                                 "the non-last ranks accumulate an unbounded overshoot in "
                                                 "`req_state.output_token_ids`")),)),
    _vllm(54270, P, "Fix output token state synchronization across PP ranks", CLOSED,
          (Post(DESCRIPTION, date(2026, 8, 28), (
              "The resulting state divergence could make PP ranks disagree on whether to perform the sampled-token "
              "broadcast, eventually causing an NCCL deadlock.",)),)),
    _vllm(54436, P, "[Bugfix][PP] Never drop a decoding request from the sampled-token broadcast", MERGED,
          (Post(DESCRIPTION, date(2026, 8, 30)),)),
    _vllm(54437, I, "[Bug]: structured output can sample unconstrained tokens when the draft hand-off goes stale "
          "(spec decode + async scheduling + PP)", OPEN, verified=Verified.TITLE),
    _vllm(56802, P, "[Bugfix][Spec Decode][Structured Output] Identify draft-token hand-off snapshots (#54437)", OPEN,
          (Post(DESCRIPTION, date(2026, 9, 14), (
              "tag them with the scheduler step, and look up by equality so async PP cannot overwrite an "
              "unidentified slot",)),)),
    _vllm(56956, P, "[DSpark] Support pipeline-parallel targets in aggregated serving", OPEN,
          (Post(DESCRIPTION, date(2026, 9, 15), ("double-posting misaligned the recv FIFO and hung the pipeline",)),)),
    _vllm(57104, P, "[BugFix][KV Connector] Fix Deadlock with KVConnector + MTP under KV Pressure", MERGED,
          (Post(DESCRIPTION, date(2026, 9, 16), (
              "Scheduler can deadlock under KV memory pressure with MTP + KV connector",
              "the queues are in the same state as before this step",)),),
          note="found with the search tool on 2026-12-07: 2 requests in 7 blocks; the explorer's no-progress "
               "finding (minispec/lab/explorer/liveness.py) has its shape, queues unchanged with work pending"),
    _vllm(57755, I, "[Bug/Design] Pipeline parallelism × speculative decoding: `sampled_token_ids` broadcast contract "
          "breaks under spec decode, and a column-truncation workaround silently corrupts output with async "
          "scheduling", OPEN,
          (Post(DESCRIPTION, date(2026, 9, 20), ("broadcasting one column is not a sufficient contract for the async "
                                                 "spec path",
                                                 "broadcast only `sampled_token_ids[:, :1]`, keep the receiver at "
                                                 "`[num_reqs, 1]`")),),
          note="the index stores its title as the placeholder \"Title\"; the title given here is the bold first "
               "line of its description of 2026-09-20 (read with the search tool on 2026-12-07)"),
    Thread(SGLANG, 30775, P, "Pipeline parallelism x speculative decoding (EAGLE/MTP) compatibility",
           MERGED, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 7, 10), (
               "non-spec PP decode already relies on a last->first output-dict relay (next sampled token becomes the "
               "next round's input, and every stage forwards the dict).",
               "Spec decoding is structurally identical — the relay payload just grows to `{accept_lens, "
               "new_seq_lens, bonus_token, next draft tree}`.")),)),
    Thread(SGLANG, 39644, P, "[Spec][PP] Reject EAGLE3/DFLASH aux hidden-state capture under pipeline parallelism",
           ThreadState.OPEN, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 9, 15), (
               "`set_eagle3_layers_to_capture` / `set_dflash_layers_to_capture` in the target models return early "
               "when the stage is not the last PP rank.",
               "the draft silently gets incomplete aux hidden states")),)),
    Thread(SGLANG, 27620, P, "Suffix decoding pp", ThreadState.CLOSED, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 6, 9), ("The protocol (Approach A — replicate drafts, propagate accept)",)),)),
    Thread(SGLANG, 29405, P, "Fix pipeline-parallel abort missing in-flight requests in non-current "
           "microbatch slots", MERGED, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 6, 26), (
               "This only manifests with more than two microbatch slots, since with two the current and previous "
               "slots already cover both.",)),)),
    Thread(SGLANG, 40001, P, "[Spec][PP] Fix hybrid recurrent-state commit and micro-batch pairing "
           "under PP x speculative decoding", OPEN, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 9, 17), (
               "Non-last PP stages never commit the accepted recurrent state.",
               "With more than two stages the relayed accept result is paired with the wrong micro-batch.",
               "With PP2 `(i-1) % 2 == (i+1) % 2`, so both errors are masked; with PP4 the first concurrent batch "
               "crashes")),),
           note="found with the search tool on 2026-12-07 (once listed as not in the index): its description "
                "states the `(i-1) % N` pairing"),
    Thread("vllm-project/vllm-ascend", 14184, P, "[Feature] Support MTP with PP in MRV2", MERGED, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 8, 13), (
               "the target sampler output is broadcast before the last stage finishes generating the next-step MTP "
               "draft tokens",)),)),
    Thread("syv-ai/qwen38-27b-rtx3090", 160, I, "MTP under pipeline parallelism (PP2): acceptance collapses 45.6% -> "
           "8%, MTP is net-negative vs SPEC=off, and async scheduling corrupts output (3090 + A4000, sm86)", OPEN,
           Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 9, 20), ("acceptance collapses 45.6%→8% (np-independent)",)),)),
    Thread("vllm-project/vllm-ascend", 15171, P, "[BugFix][MRV2] Sync num_computed_tokens on non-last PP ranks "
           "with MTP", OPEN, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 8, 28), ("a length that was never reverted after a rejected draft token",)),)),
    Thread("jupyterlab/jupyterlab", 15207, I, "", ThreadState.NOT_READ, Verified.NOT_READ),
    _vllm(48245, P, "[BugFix] Fix `num_output_placeholders` preemption underflow", MERGED,
          (Post(DESCRIPTION, date(2026, 7, 10), (
              "chose to **discard** the request's in-flight output — an approach that was incomplete and not lossless",
              "the stale in-flight output still returns and drains against the reset counters")),)),
    _vllm(47900, P, "[Bugfix][Core] Discard in-flight async output frames on preemption to fix "
          "num_output_placeholders underflow", ThreadState.CLOSED,
          (Post(DESCRIPTION, date(2026, 7, 7), (
              "the same assert still fires on the common **KV-pressure preemption** path under load",)),)),
    Thread("vllm-project/vllm-gaudi", 1794, P, "fix: keep stale in-flight output after async-scheduling preemption",
           MERGED, Verified.SEARCHED,
           (Post(DESCRIPTION, date(2026, 9, 14), (
               "So those frames now match our discard condition, and the override swallows output that upstream "
               "delivers on purpose.",
               "On an 8-card TP=8 serving run this more than tripled the preemption count for the same delivered "
               "output.")),)),
    Thread("vllm-project/vllm-gaudi", 1803, P, "fix: keep stale in-flight output after async-scheduling preemption",
           OPEN, Verified.SEARCHED, (Post(DESCRIPTION, date(2026, 9, 18), (
               "The swallowed token is legitimately resampled after recompute, so output is not corrupted",)),)),
    Thread("tenstorrent/vllm-tt-plugin", 131, P, "[feat] Speculative decoding: the model's own drafter proposes on "
           "device", OPEN, Verified.TITLE,
           note="the search tool's excerpt of its description (no date shown) lists, among fixes reachable only "
                "when a commit runs a step after its submission, a drafter that sized a row's context by the step's "
                "row after condense moved the request, and a late commit that revived a preempted request's state"),
)

# A reference in prose: "owner/name#N", "sglang #N" / "vllm-ascend PR #N" / "JupyterLab issue #N", a
# bare "#N" (vLLM's), or a thread's URL. Colours ("#999999") are quoted or run on into letters.
_NAMED = {"sglang": SGLANG, "vllm-ascend": "vllm-project/vllm-ascend",
          "jupyterlab": "jupyterlab/jupyterlab", "vllm-gaudi": "vllm-project/vllm-gaudi",
          "vllm-tt-plugin": "tenstorrent/vllm-tt-plugin"}
REFERENCE = re.compile(
    r"github\.com/(?P<url_repo>[\w.-]+/[\w.-]+)/(?:pull|issues)/(?P<url_num>\d+)"
    r"|(?P<repo>[\w.-]+/[\w.-]+)#(?P<repo_num>\d+)"
    r"|(?:(?P<name>sglang|vllm-ascend|jupyterlab|vllm-gaudi|vllm-tt-plugin)\s+(?:(?:pr|issue|rfc)\s+)?)?(?<![\"'\w&])#(?P<num>[1-9]\d{2,5})(?!\w)",
    re.IGNORECASE,
)


def references(text: str) -> set[tuple[str, int]]:
    """Every (repository, number) the text refers to."""
    found = set()
    for m in REFERENCE.finditer(text):
        if m.group("url_repo"):
            found.add((m.group("url_repo"), int(m.group("url_num"))))
        elif m.group("repo"):
            found.add((m.group("repo"), int(m.group("repo_num"))))
        else:
            repo = _NAMED[m.group("name").lower()] if m.group("name") else VLLM
            found.add((repo, int(m.group("num"))))
    return found


def thread(repo: str, number: int) -> Thread:
    """The table's entry for a reference; KeyError, naming it, if it has none."""
    for t in THREADS:
        if (t.repo, t.number) == (repo, number):
            return t
    raise KeyError(f"{repo}#{number} is cited but not in minispec.lab.records.threads.THREADS: add it, with its source")
