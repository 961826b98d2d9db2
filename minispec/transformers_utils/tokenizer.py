"""Loading a checkpoint's tokenizer (vLLM: ``vllm/transformers_utils/tokenizer.py``).

vLLM's ``get_tokenizer`` goes through transformers' ``AutoTokenizer`` and a
tokenizer cache; minispec's checkpoints carry a plain ``tokenizer.json`` (one
token per character, built by ``training.tokenizer``), which the
``tokenizers`` library reads directly, so ``import transformers`` stays off the
serving path. Left out: slow tokenizers, chat templates, detokenizer caches.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer


def load_tokenizer(model_dir: str | Path) -> Tokenizer | None:
    """The checkpoint's ``tokenizer.json``, or None if it has none (ids only)."""
    path = Path(model_dir) / "tokenizer.json"
    return Tokenizer.from_file(str(path)) if path.is_file() else None
