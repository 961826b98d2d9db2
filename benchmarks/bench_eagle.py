"""EAGLE heads against the draft model: tokens per target forward, and speed against transformers.

The same held-out prompts, greedy, k = 3 drafts per step, on CPU, one pipeline stage, as
``bench_spec_decode.py`` (whose helpers this reuses): minispec drafting with the shipped EAGLE-3
head (it reads the target's taps entering layers 1, 2, 3), the shipped EAGLE head (the target's
last hidden state) and the shipped draft model, beside transformers' assisted generation with
that draft model (transformers has no EAGLE drafting: its assisted generation takes a separate
assistant model) and plain ``generate``. Printed: per run, tokens, wall time, tokens/s, target
forwards, acceptance and tokens per target forward; then each minispec run's speed-up against
assisted and plain generation. Ratios, not timed tests: a shared CPU moves the wall times.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))  # its sibling, however the script is started
from bench_spec_decode import K, load, parse_args, run_minispec, run_transformers  # noqa: E402

METHODS = ("eagle3", "eagle", "draft_model")


def main():
    args = parse_args(__doc__)
    prompt_ids, target, draft = load(args.requests)

    runs = {m: run_minispec(prompt_ids, args.max_tokens, args.repeat, method=m) for m in METHODS}
    hf_out, hf_time, hf_fwd = run_transformers(target, prompt_ids, args.max_tokens, args.repeat, assistant_model=draft)
    pl_out, pl_time, pl_fwd = run_transformers(target, prompt_ids, args.max_tokens, args.repeat)
    print(f"{args.requests} requests x {args.max_tokens} new tokens, greedy, k={K}, CPU, {torch.get_num_threads()} "
          f"threads, best of {args.repeat}\n")
    print(f"{'run':<34}{'tokens':>8}{'wall s':>9}{'tok/s':>9}{'target calls':>14}{'accept':>8}{'tok/fwd':>9}")
    tps = {}
    for method, (outs, secs, stats) in runs.items():
        name, n = f"minispec {method} (batched)", sum(map(len, outs))
        tps[method] = n / secs
        print(f"{name:<34}{n:>8}{secs:>9.2f}{n / secs:>9.1f}{stats['target_forwards']:>14}"
              f"{stats['acceptance_rate']:>8.3f}{stats['tokens_per_forward']:>9.3f}")
    for name, outs, secs, calls in (("transformers assisted (draft)", hf_out, hf_time, hf_fwd),
                                    ("transformers plain", pl_out, pl_time, pl_fwd)):
        n = sum(map(len, outs))
        tps[name] = n / secs
        per_request = sum(map(len, outs)) / calls  # one request at a time: forwards are per request
        print(f"{name:<34}{n:>8}{secs:>9.2f}{n / secs:>9.1f}{calls:>14}{'':>8}{per_request:>9.3f}")
    print()
    for method, (outs, _, _) in runs.items():
        same = sum(a == b for a, b in zip(outs, pl_out))
        print(f"{'minispec ' + method:<22} / assisted {tps[method] / tps['transformers assisted (draft)']:>6.2f}x"
              f"   / plain {tps[method] / tps['transformers plain']:>6.2f}x   equal to plain: {same}/{args.requests}")
    eagle3, drafted = runs["eagle3"][2], runs["draft_model"][2]
    print(f"\ntokens per target forward, eagle3 / draft model: "
          f"{eagle3['tokens_per_forward'] / drafted['tokens_per_forward']:.2f}x")


if __name__ == "__main__":
    main()
