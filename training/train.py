"""Train the shipped target and draft checkpoints from CPython's own text.

    python -m training.train --out minispec/checkpoints

Both models are transformers ``LlamaForCausalLM`` so that any transformers user
can load them; minispec's own forward (``minispec.model_executor``) is tested
against exactly these weights. Training is seeded and counts steps, not
seconds, so the same command gives the same weights on the same torch build.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from minispec.training.corpus import split_text
from training.tokenizer import EOS, UNK, build_tokenizer


@dataclass
class ModelSpec:
    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    steps: int


TARGET = ModelSpec("target", 128, 4, 4, 2, 384, steps=700)
DRAFT = ModelSpec("draft", 128, 1, 4, 2, 384, steps=600)
MAX_POSITIONS = 1024


def llama_config(spec: ModelSpec, vocab_size: int, eos_id: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=MAX_POSITIONS,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )


def lr_at(step: int, total: int, peak: float, warmup: int = 50) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def batches(ids: np.ndarray, seq_len: int, batch_size: int, rng: np.random.Generator):
    while True:
        starts = rng.integers(0, len(ids) - seq_len - 1, size=batch_size)
        window = np.stack([ids[s : s + seq_len + 1] for s in starts])
        yield torch.from_numpy(window).long()


def train_model(spec, vocab_size, eos_id, train_ids, args) -> "torch.nn.Module":
    from transformers import LlamaForCausalLM

    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(llama_config(spec, vocab_size, eos_id))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1, betas=(0.9, 0.95))
    data = batches(train_ids, args.seq_len, args.batch_size, np.random.default_rng(args.seed))
    steps = args.steps_scale * spec.steps
    bar = tqdm(range(steps), desc=f"train {spec.name}")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, args.lr)
        window = next(data)
        loss = model(input_ids=window[:, :-1], labels=window[:, :-1].clone()).loss
        # transformers shifts labels itself, so the last column is only a label
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    return model.eval()


@torch.no_grad()
def heldout_loss(model, ids: np.ndarray, seq_len: int) -> float:
    """Mean next-character loss (nats) over non-overlapping held-out windows."""
    losses = []
    for start in range(0, len(ids) - seq_len - 1, seq_len):
        window = torch.from_numpy(ids[start : start + seq_len]).long()[None]
        losses.append(model(input_ids=window, labels=window).loss.item())
    return float(np.mean(losses))


@torch.no_grad()
def greedy_agreement(target, draft, ids: np.ndarray, n_prompts=16, prompt_len=64, new=128) -> float:
    """How often the draft's argmax equals the target's greedy choice, measured
    along the target's own greedy continuations of held-out prompts."""
    agree = total = 0
    starts = np.linspace(0, len(ids) - prompt_len - 1, n_prompts).astype(int)
    for s in starts:
        prompt = torch.from_numpy(ids[s : s + prompt_len]).long()[None]
        seq = target.generate(prompt, max_new_tokens=new, do_sample=False, min_new_tokens=new)
        draft_choice = draft(input_ids=seq).logits[0, prompt_len - 1 : -1].argmax(-1)
        agree += int((draft_choice == seq[0, prompt_len:]).sum())
        total += new
    return agree / total


def save(model, hf_tokenizer, out: Path, card: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.do_sample = False
    model.save_pretrained(out, safe_serialization=True)
    hf_tokenizer.save_pretrained(out)
    (out / "README.md").write_text(card)


def model_card(spec, model, metrics: dict, args) -> str:
    n_params = sum(p.numel() for p in model.parameters())
    return f"""# minispec {spec.name} checkpoint

Llama architecture (RMSNorm, RoPE, SwiGLU, grouped-query attention), character-level
tokenizer shared by target and draft. Trained on CPython's `pydoc_data.topics`
(Python {metrics['python']}), last 5% of characters held out.

| | |
|---|---|
| parameters | {n_params:,} |
| layers / hidden / heads / kv heads / mlp | {spec.num_hidden_layers} / {spec.hidden_size} / {spec.num_attention_heads} / {spec.num_key_value_heads} / {spec.intermediate_size} |
| vocabulary | {model.config.vocab_size} |
| max positions | {MAX_POSITIONS} (trained on {args.seq_len}-character windows) |
| training | {args.steps_scale * spec.steps} steps, batch {args.batch_size}, AdamW peak lr {args.lr}, seed {args.seed} |
| training time | {metrics[spec.name + '_seconds']:.0f} s on {torch.get_num_threads()} CPU threads |
| held-out loss | {metrics[spec.name + '_heldout_loss']:.3f} nats/char |
| draft/target greedy agreement | {metrics['agreement']:.1%} of positions along the target's greedy continuations |

Reproduce: `{metrics['command']}`
"""


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "checkpoints")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps-scale", type=int, default=1, help="multiply every model's step count")
    args = p.parse_args(argv)

    import platform

    from transformers import PreTrainedTokenizerFast

    train_text, heldout_text = split_text()
    tok = build_tokenizer(train_text + heldout_text)
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=UNK, eos_token=EOS, pad_token=EOS)
    train_ids = np.array(tok.encode(train_text).ids, dtype=np.int64)
    heldout_ids = np.array(tok.encode(heldout_text).ids, dtype=np.int64)
    vocab, eos_id = tok.get_vocab_size(), tok.token_to_id(EOS)

    metrics = {"python": platform.python_version(), "command": " ".join(["python -m training.train", *(argv or [])])}
    models = {}
    for spec in (TARGET, DRAFT):
        t0 = time.time()
        models[spec.name] = train_model(spec, vocab, eos_id, train_ids, args)
        metrics[spec.name + "_seconds"] = time.time() - t0
        metrics[spec.name + "_heldout_loss"] = heldout_loss(models[spec.name], heldout_ids, args.seq_len)
    metrics["agreement"] = greedy_agreement(models["target"], models["draft"], heldout_ids)
    for spec in (TARGET, DRAFT):
        save(models[spec.name], hf_tok, args.out / spec.name, model_card(spec, models[spec.name], metrics, args))
    print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
