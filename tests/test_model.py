"""minispec's stage model against transformers' own LlamaForCausalLM."""

import pytest
import torch

from minispec.attention import allocate_kv_cache, make_attention_metadata
from minispec.config import LlamaArchitecture
from minispec.model_executor.model_loader import get_model

BLOCK_SIZE = 16


class PagedHarness:
    """Runs a pipeline of stage models over a paged cache, one ragged batch at a
    time, with blocks handed out to each request in interleaved order so that
    no request's blocks are contiguous."""

    def __init__(self, path, pp_size, num_blocks=64):
        self.stages = [get_model(path, r, pp_size) for r in range(pp_size)]
        arch = self.stages[0].arch
        for stage in self.stages:
            for attn in stage.attention_layers:
                attn.kv_cache = allocate_kv_cache(
                    num_blocks, BLOCK_SIZE, arch.num_key_value_heads, arch.head_dim, torch.float32, "cpu"
                )
        self.free_blocks = list(range(num_blocks - 1, -1, -1))
        self.blocks: dict[int, list[int]] = {}
        self.computed: dict[int, int] = {}

    def step(self, batch: list[tuple[int, list[int]]]) -> list[torch.Tensor]:
        """batch: (request id, tokens to feed). Returns per-request logits."""
        starts = [self.computed.get(rid, 0) for rid, _ in batch]
        for (rid, tokens), start in zip(batch, starts):
            table = self.blocks.setdefault(rid, [])
            while len(table) * BLOCK_SIZE < start + len(tokens):
                table.append(self.free_blocks.pop())
            self.computed[rid] = start + len(tokens)
        width = max(len(self.blocks[rid]) for rid, _ in batch)
        table = [self.blocks[rid] + [0] * (width - len(self.blocks[rid])) for rid, _ in batch]
        positions, meta = make_attention_metadata(starts, [len(t) for _, t in batch], table, BLOCK_SIZE)
        ids = torch.tensor([t for _, tokens in batch for t in tokens])
        x = None
        for stage in self.stages:
            x = stage(ids, positions, meta, x)
        logits = self.stages[-1].compute_logits(x)
        qsl = meta.query_start_loc
        return [logits[qsl[i] : qsl[i + 1]] for i in range(len(batch))]


def reference_logits(path, seq):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([seq])).logits[0]


def sequences(vocab, lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, vocab, (n,), generator=g).tolist() for n in lengths]


@pytest.mark.parametrize("pp_size", [1, 2, 3])
def test_ragged_paged_forward_matches_transformers(any_checkpoint, pp_size):
    arch = LlamaArchitecture.from_pretrained(any_checkpoint)
    if pp_size > arch.num_hidden_layers:
        pytest.skip(f"{arch.num_hidden_layers}-layer model cannot be cut into {pp_size} stages")
    seqs = sequences(arch.vocab_size, [45, 7, 70])
    refs = [reference_logits(any_checkpoint, s) for s in seqs]
    h = PagedHarness(any_checkpoint, pp_size)
    # Step schedule: every step is one ragged batch mixing prefill chunks that
    # cross block boundaries, single-token decodes and decodes carrying 3
    # "draft" tokens (any tokens; the model must just process them correctly).
    schedule = [
        [(0, 20), (1, 5), (2, 33)],
        [(0, 21), (1, 1), (2, 31)],
        [(0, 1), (1, 1), (2, 4)],
        [(0, 3), (2, 2)],
    ]
    fed = {0: 0, 1: 0, 2: 0}
    for step in schedule:
        batch = [(rid, seqs[rid][fed[rid] : fed[rid] + n]) for rid, n in step]
        out = h.step(batch)
        for (rid, tokens), logits in zip(batch, out):
            expected = refs[rid][fed[rid] : fed[rid] + len(tokens)]
            assert (logits - expected).abs().max().item() <= 1e-4, (rid, fed[rid])
            fed[rid] += len(tokens)
    assert fed == {0: 45, 1: 7, 2: 70}


def test_other_shapes(tmp_path):
    from conftest import save_random_llama

    path = save_random_llama(
        tmp_path, hidden_size=64, num_attention_heads=8, num_key_value_heads=4,
        num_hidden_layers=3, intermediate_size=100, tie_word_embeddings=False, head_dim=16,
    )
    seq = sequences(97, [40])[0]
    h = PagedHarness(path, 3)
    out = torch.cat([h.step([(0, seq[:25])])[0], h.step([(0, seq[25:])])[0]])
    assert (out - reference_logits(path, seq)).abs().max().item() <= 1e-4


def test_each_stage_holds_only_its_own_weights(random_llama_dir):
    stages = [get_model(random_llama_dir, r, 3) for r in range(3)]
    names = [set(n for n, _ in s.named_parameters()) for s in stages]
    assert any("embed_tokens" in n for n in names[0]) and not any("lm_head" in n for n in names[0])
    assert not any("embed_tokens" in n or "lm_head" in n or ".norm." in n for n in names[1])
    assert "lm_head.weight" in names[2] and "model.norm.weight" in names[2]
    layers = [sorted({int(n.split(".")[2]) for n in ns if ".layers." in n}) for ns in names]
    assert layers == [[0, 1], [2, 3], [4]]  # vLLM gives the remainder to the stages before the last


def test_bad_checkpoints_are_named(tmp_path, random_llama_dir):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        get_model(tmp_path / "nope")
    (tmp_path / "gpt").mkdir()
    (tmp_path / "gpt" / "config.json").write_text('{"model_type": "gpt2"}')
    with pytest.raises(ValueError, match="model_type 'llama'.*'gpt2'"):
        get_model(tmp_path / "gpt")
    with pytest.raises(ValueError, match="pipeline_parallel_size=6: expected an integer from 1 to the model's 5"):
        get_model(random_llama_dir, 0, 6)


def test_loading_a_stage_does_not_import_torch_dynamo(random_llama_dir):
    """The stage is built on the meta device, where any arithmetic (nn.Embedding's own init, the
    rotary frequencies) imports torch._dynamo: 2-4 s in every process that loads a stage, twice per
    pipeline in notebook 04's measured cell. A fresh interpreter, because another test may have imported it."""
    import subprocess
    import sys

    code = ("import sys, torch; from minispec.model_executor.model_loader import get_model; "
            "m = get_model(sys.argv[1], 0, 2); "
            "print('torch._dynamo' in sys.modules, m.model.layers['0'].self_attn.rotary_emb.inv_freq.device)")
    out = subprocess.run([sys.executable, "-c", code, str(random_llama_dir)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "cpu"], out.stdout + out.stderr
