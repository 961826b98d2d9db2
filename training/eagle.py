"""Train the shipped EAGLE heads on the shipped target (``minispec/checkpoints/eagle3``, ``eagle``).

    nice -n 10 python -m training.eagle --out minispec/checkpoints

The target is frozen; its features come from transformers' ``output_hidden_states``
(``hidden_states[i]`` is the stream entering layer ``i``, the tap minispec's stages capture,
``tests/test_eagle.py`` checks they agree; the last entry is after the final norm, what
``"eagle"`` reads). Labels are the target's own next-token distributions (EAGLE-3 trains on the
target's outputs, not the corpus's tokens), so the head learns what the rejection sampler will
accept. Training-time test, as EAGLE-3 does it (the paper's "training-time test"; vLLM serves
heads trained so): the head is unrolled ``--unroll`` draft steps, step ``j`` reading its own
output stream from step ``j - 1``, attending to step 1's keys up to its base position and to its
own earlier steps' keys at that position (what the drafter's paged cache holds at inference),
with step ``j``'s loss weighted ``0.8 ** (j - 1)``.

The forward here is the head's own (``model_executor/models/llama_eagle3.py``) with batched,
unpaged attention; ``tests/test_eagle.py`` checks step 1 against the engine's paged forward.
Seeded, counted in steps, one CPU thread.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from minispec.config import DEFAULT_TARGET, LlamaArchitecture
from minispec.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
from minispec.training.corpus import split_text
from training.train import batches, lr_at

TAPS = (1, 2, 3)  # the streams entering layers 1, 2, 3 of the 4: early, middle, late
HEAD_MLP = 256


def head_config(target_dir: Path, taps: tuple[int, ...]) -> dict:
    cfg = json.loads((target_dir / "config.json").read_text())
    cfg.update(architectures=["Eagle3LlamaForCausalLM"], num_hidden_layers=1, intermediate_size=HEAD_MLP,
               eagle_aux_hidden_state_layer_ids=list(taps), target_hidden_size=cfg["hidden_size"])
    return cfg


def new_head(target, arch: LlamaArchitecture, taps: tuple[int, ...], seed: int) -> Eagle3LlamaForCausalLM:
    """A head whose embedding (frozen) and ``lm_head`` start as the target's."""
    torch.manual_seed(seed)
    head = Eagle3LlamaForCausalLM(arch, taps)
    head.embed_tokens.weight.data.copy_(target.model.embed_tokens.weight)
    head.embed_tokens.weight.requires_grad_(False)
    head.lm_head.weight.data.copy_(target.lm_head.weight)
    return head


@torch.no_grad()
def target_features(target, window: torch.Tensor, taps: tuple[int, ...]):
    """Per position: the feature the head reads, and the target's next-token log-probabilities."""
    out = target(input_ids=window, output_hidden_states=True)
    states = out.hidden_states
    feats = torch.cat([states[i] for i in taps], -1) if taps else states[-1]
    return feats, out.logits.log_softmax(-1)


def _qkv(head, embeds, hidden, positions):
    layer, attn = head.midlayer, head.midlayer.self_attn
    x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(hidden)], dim=-1)
    b, t, _ = x.shape
    q = attn.q_proj(x).view(b * t, attn.num_heads, attn.head_dim)
    k = attn.k_proj(x).view(b * t, attn.num_kv_heads, attn.head_dim)
    v = attn.v_proj(x).view(b, t, attn.num_kv_heads, attn.head_dim)
    q, k = attn.rotary_emb(positions.reshape(-1), q, k)
    return q.view(b, t, attn.num_heads, -1), k.view(b, t, attn.num_kv_heads, -1), v


def _attend(q, keys, values, diag_keys, diag_values):
    """Causal attention over step 1's keys, plus each position's own keys of later steps."""
    group, scale = q.shape[2] // keys.shape[2], 1 / math.sqrt(q.shape[-1])
    rep = lambda x: x.repeat_interleave(group, dim=2)  # noqa: E731
    t = q.shape[1]
    main = torch.einsum("bihd,bjhd->bhij", q, rep(keys)) * scale
    main = main.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    diag = [torch.einsum("bihd,bihd->bhi", q, rep(k)) * scale for k in diag_keys]
    probs = torch.cat([main] + [d[..., None] for d in diag], -1).softmax(-1)
    out = torch.einsum("bhij,bjhd->bihd", probs[..., :t], rep(values))
    for n, v in enumerate(diag_values):
        out = out + probs[..., t + n].transpose(1, 2)[..., None] * rep(v)
    return out.reshape(*out.shape[:2], -1)


def unrolled_loss(head, window: torch.Tensor, feats: torch.Tensor, target_logp: torch.Tensor, unroll: int):
    """Training-time test over bases ``0..T-1`` (``T = len - unroll``): step ``j`` at base ``i``
    sits at position ``i + j - 1``, feeds token ``i + j`` and is scored against the target's
    distribution at ``i + j``."""
    t = window.shape[1] - unroll
    hidden = head.combine_hidden_states(feats[:, :t])
    base = torch.arange(t).expand(window.shape[0], t)
    keys = values = None
    diag_keys, diag_values, loss = [], [], 0.0
    for j in range(1, unroll + 1):
        q, k, v = _qkv(head, head.embed_tokens(window[:, j : j + t]), hidden, base + j - 1)
        if j == 1:
            keys, values = k, v
        else:
            diag_keys.append(k)
            diag_values.append(v)
        residual = hidden + head.midlayer.self_attn.o_proj(_attend(q, keys, values, diag_keys, diag_values))
        hidden = residual + head.midlayer.mlp(head.midlayer.post_attention_layernorm(residual))
        logp = head.compute_logits(head.norm(hidden)).log_softmax(-1)
        kl = F.kl_div(logp, target_logp[:, j : j + t], log_target=True, reduction="none").sum(-1).mean()
        loss = loss + 0.8 ** (j - 1) * kl
    return loss


@torch.no_grad()
def step1_agreement(head, target, ids: np.ndarray, taps, seq_len: int = 256) -> float:
    """How often the head's first draft equals the target's greedy token, on held-out windows."""
    agree = total = 0
    for start in range(0, len(ids) - seq_len - 1, seq_len):
        window = torch.from_numpy(ids[start : start + seq_len]).long()[None]
        feats, logp = target_features(target, window, taps)
        hidden = head.combine_hidden_states(feats[:, :-1])
        q, k, v = _qkv(head, head.embed_tokens(window[:, 1:]), hidden, torch.arange(seq_len - 1)[None])
        residual = hidden + head.midlayer.self_attn.o_proj(_attend(q, k, v, [], []))
        out = residual + head.midlayer.mlp(head.midlayer.post_attention_layernorm(residual))
        guess = head.compute_logits(head.norm(out)).argmax(-1)
        agree += int((guess == logp[:, 1:].argmax(-1)).sum())
        total += guess.numel()
    return agree / total


def train_head(target, arch, taps, train_ids, args) -> Eagle3LlamaForCausalLM:
    head = new_head(target, arch, taps, args.seed)
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    data = batches(train_ids, args.seq_len + args.unroll - 1, args.batch_size, np.random.default_rng(args.seed))
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps, args.lr)
        window = next(data)
        feats, logp = target_features(target, window, taps)
        loss = unrolled_loss(head, window, feats, logp, args.unroll)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            print(f"{'eagle3' if taps else 'eagle'} step {step}: loss {loss.item():.3f}", flush=True)
    return head.eval()


def save_head(head, out: Path, target_dir: Path, taps, card: str) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(head_config(target_dir, taps), indent=2) + "\n")
    # float16 on disk (half the bytes; loading casts to the engine's dtype): the head stays a few hundred KB
    save_file({k: v.half().contiguous() for k, v in head.state_dict().items()}, out / "model.safetensors")
    (out / "README.md").write_text(card)


def model_card(name: str, head, metrics: dict, args) -> str:
    n = sum(p.numel() for p in head.parameters())
    reads = (f"the target's streams entering layers {list(head.aux_layers)} (of 4), concatenated and projected"
             if head.aux_layers else "the target's last hidden state (after its final norm)")
    return f"""# minispec {name} head

An EAGLE draft head for `minispec/checkpoints/target`: one Llama decoder layer whose attention
reads the next token's embedding beside a feature of the target: {reads}.
Trained with `training.eagle` on CPython's `pydoc_data.topics` (the target's corpus),
against the frozen target's own next-token distributions, unrolled {args.unroll} draft steps.

| | |
|---|---|
| parameters | {n:,} (embedding, frozen, copied from the target: {head.embed_tokens.weight.numel():,}) |
| layers / hidden / heads / kv heads / mlp | 1 / {head.arch.hidden_size} / {head.arch.num_attention_heads} / {head.arch.num_key_value_heads} / {HEAD_MLP} |
| training | {args.steps} steps, batch {args.batch_size}, windows of {args.seq_len}, AdamW peak lr {args.lr}, seed {args.seed} |
| stored as | float16, {metrics['bytes'] / 1024:.0f} KiB |
| training time | {metrics['seconds']:.0f} s wall, {metrics['cpu_seconds']:.0f} s CPU, on {torch.get_num_threads()} CPU thread(s) |
| first draft = target's greedy token | {metrics['step1_agreement']:.1%} of held-out positions |

Reproduce: `python -m training.eagle --out minispec/checkpoints`
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "checkpoints")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--unroll", type=int, default=3, help="draft steps trained together (training-time test)")
    p.add_argument("--which", choices=("eagle3", "eagle", "both"), default="both")
    args = p.parse_args(argv)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    target = AutoModelForCausalLM.from_pretrained(DEFAULT_TARGET, dtype=torch.float32).eval().requires_grad_(False)
    arch = LlamaArchitecture.from_pretrained(DEFAULT_TARGET)
    arch = LlamaArchitecture(**{**arch.__dict__, "num_hidden_layers": 1, "intermediate_size": HEAD_MLP})
    tok = AutoTokenizer.from_pretrained(DEFAULT_TARGET)
    train_text, heldout_text = split_text()
    train_ids = np.array(tok(train_text).input_ids, dtype=np.int64)
    heldout_ids = np.array(tok(heldout_text).input_ids, dtype=np.int64)
    for name, taps in (("eagle3", TAPS), ("eagle", ())):
        if args.which not in (name, "both"):
            continue
        t0, c0 = time.time(), time.process_time()
        head = train_head(target, arch, taps, train_ids, args)
        metrics = {"seconds": time.time() - t0, "cpu_seconds": time.process_time() - c0,
                   "step1_agreement": step1_agreement(head, target, heldout_ids, taps),
                   "bytes": 2 * sum(v.numel() for v in head.state_dict().values())}
        print(name, json.dumps(metrics))
        save_head(head, args.out / name, DEFAULT_TARGET, taps, model_card(name, head, metrics, args))


if __name__ == "__main__":
    main()
