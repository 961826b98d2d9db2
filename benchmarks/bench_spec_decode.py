"""Speculative decoding throughput: minispec against transformers' assisted generation.

Both sides run the shipped target (4 layers) with the shipped draft (1 layer),
greedy, k = 3 draft tokens per step, on the same held-out prompts, on CPU.
Printed: wall time and generated tokens/s for minispec, transformers with the
assistant, and plain transformers ``generate``; the minispec / assisted speed
ratio; how many requests produce identical greedy tokens; and the measured
per-draft-token acceptance alpha and target forwards per token, next to what
alpha predicts for i.i.d. acceptance: E[tokens per forward] = (1 - alpha^(k+1)) / (1 - alpha).

transformers is run one request at a time because assisted generation refuses a
batch (it needs every row to accept the same number of drafts). That is the
comparison the ratio makes: minispec's batched engine against the only way
transformers can do draft-model speculation, not a kernel-for-kernel race.

Wall times are the fastest of ``--repeat`` runs. On a small shared CPU this
matters: with torch's default two threads, another busy process makes every
tiny op wait on a descheduled worker thread, and a run can slow down 10-100x.
"""

from __future__ import annotations

import argparse
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

from minispec import LLM, SamplingParams
from minispec.config import DEFAULT_DRAFT, DEFAULT_TARGET
from minispec.training.corpus import split_text

K = 3
PROMPT_CHARS = 40


def make_prompts(n: int) -> list[str]:
    _, heldout = split_text()
    step = (len(heldout) - PROMPT_CHARS) // n
    return [heldout[i * step : i * step + PROMPT_CHARS] for i in range(n)]


def implied_alpha(tokens_per_forward: float) -> float:
    """The alpha at which (1 - alpha^(k+1)) / (1 - alpha) equals the measured value."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sum(mid**i for i in range(K + 1)) < tokens_per_forward else (lo, mid)
    return lo


def run_minispec(prompt_ids, max_tokens, repeat, method="draft_model"):
    def build():
        return LLM(pipeline_parallel_size=1, speculative_config={"method": method, "num_speculative_tokens": K},
                   max_num_seqs=16, max_num_batched_tokens=1024)

    build().generate(prompt_ids[:2], SamplingParams(temperature=0, max_tokens=8))  # warm-up
    params = SamplingParams(temperature=0, max_tokens=max_tokens)
    best = float("inf")
    for _ in range(repeat):
        llm = build()  # fresh, because stats() accumulate over an instance's lifetime
        t0 = time.perf_counter()
        outs = llm.generate(prompt_ids, params)
        best = min(best, time.perf_counter() - t0)
    return [o.outputs[0].token_ids for o in outs], best, llm.stats()


def run_transformers(model, prompt_ids, max_tokens, repeat, **kwargs):
    """Returns outputs, wall time and the number of target forward calls."""
    calls = []
    hook = model.register_forward_hook(lambda *_: calls.append(1))

    def gen(ids, n):
        x = torch.tensor([ids])
        with torch.inference_mode():
            return model.generate(x, do_sample=False, max_new_tokens=n, **kwargs)[0, x.shape[1]:].tolist()

    gen(prompt_ids[0], 8)  # warm-up
    best = float("inf")
    for _ in range(repeat):
        calls.clear()
        t0 = time.perf_counter()
        outs = [gen(ids, max_tokens) for ids in prompt_ids]
        best = min(best, time.perf_counter() - t0)
    hook.remove()
    return outs, best, len(calls)


def load(requests: int):
    """The prompts' token ids, and transformers' target and draft, the draft pinned to k drafts a step."""
    tok = AutoTokenizer.from_pretrained(DEFAULT_TARGET)
    # One tokenisation fed to both sides, so any mismatch is in decoding, not in the prompts.
    prompt_ids = [tok(p).input_ids for p in make_prompts(requests)]
    target = AutoModelForCausalLM.from_pretrained(DEFAULT_TARGET, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(DEFAULT_DRAFT, dtype=torch.float32).eval()
    # transformers' defaults draft up to 20 tokens and stop early below a confidence
    # threshold it tunes on the fly; pin it to exactly k drafts per step like minispec.
    draft.generation_config.num_assistant_tokens = K
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    return prompt_ids, target, draft


def parse_args(doc: str) -> argparse.Namespace:
    """The options every speculative-decoding benchmark takes, with quiet transformers."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per side; the fastest is reported")
    transformers.logging.set_verbosity_error()  # keep the table free of load bars and deprecation notes
    transformers.logging.disable_progress_bar()
    return ap.parse_args()


def main():
    args = parse_args(__doc__)

    prompt_ids, target, draft = load(args.requests)

    ms_out, ms_time, stats = run_minispec(prompt_ids, args.max_tokens, args.repeat)
    hf_out, hf_time, hf_fwd = run_transformers(target, prompt_ids, args.max_tokens, args.repeat, assistant_model=draft)
    pl_out, pl_time, pl_fwd = run_transformers(target, prompt_ids, args.max_tokens, args.repeat)

    rows = [("minispec (batched, k=3)", ms_out, ms_time, stats["target_forwards"]),
            ("transformers assisted (k=3)", hf_out, hf_time, hf_fwd),
            ("transformers plain", pl_out, pl_time, pl_fwd)]
    print(f"{args.requests} requests x {args.max_tokens} new tokens, greedy, CPU, {torch.get_num_threads()} threads, "
          f"best of {args.repeat}\n")
    # "target calls" counts forward invocations: minispec's are batched over requests, transformers' are per request.
    print(f"{'run':<30}{'tokens':>8}{'wall s':>9}{'tok/s':>9}{'target calls':>14}")
    for name, outs, secs, calls in rows:
        n = sum(map(len, outs))
        print(f"{name:<30}{n:>8}{secs:>9.2f}{n / secs:>9.1f}{calls:>14}")

    tps = lambda outs, secs: sum(map(len, outs)) / secs
    alpha, per_fwd = stats["acceptance_rate"], stats["tokens_per_forward"]
    expected = (1 - alpha ** (K + 1)) / (1 - alpha) if alpha < 1 else K + 1.0
    same = lambda a, b: sum(x == y for x, y in zip(a, b))
    n = args.requests
    print()
    print(f"{'speed-up minispec / assisted':<44}{tps(ms_out, ms_time) / tps(hf_out, hf_time):>8.2f}x  (target >= 3x)")
    print(f"{'speed-up minispec / plain':<44}{tps(ms_out, ms_time) / tps(pl_out, pl_time):>8.2f}x")
    print(f"{'speed-up assisted / plain':<44}{tps(hf_out, hf_time) / tps(pl_out, pl_time):>8.2f}x")
    print(f"{'requests equal: minispec vs assisted':<44}{same(ms_out, hf_out):>5}/{n}")
    print(f"{'requests equal: minispec vs plain':<44}{same(ms_out, pl_out):>5}/{n}")
    print(f"{'acceptance alpha (accepted / drafted)':<44}{alpha:>8.3f}  ({stats['accepted_tokens']}/{stats['draft_tokens']})")
    # accepted/drafted counts drafts after the first rejection as failures, while the formula's alpha
    # is the chance a draft is accepted given the ones before it were; the implied alpha is the latter.
    print(f"{'alpha implied by measured tokens / forward':<44}{implied_alpha(per_fwd):>8.3f}")
    print(f"{'tokens per target forward   measured':<44}{per_fwd:>8.3f}")
    print(f"{'                            expected':<44}{expected:>8.3f}  (1 - a^(k+1)) / (1 - a)")
    print(f"{'target forwards per token   measured':<44}{1 / per_fwd:>8.3f}")
    print(f"{'                            expected':<44}{1 / expected:>8.3f}")
    print(f"{'preemptions':<44}{stats['preemptions']:>8}")


if __name__ == "__main__":
    main()
