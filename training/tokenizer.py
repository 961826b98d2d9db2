"""A character-level tokenizer built with the ``tokenizers`` library.

Every character of the training corpus is one token; ids are assigned in sorted
character order after the special tokens, so the vocabulary is reproducible.
Target and draft share this tokenizer, as speculative decoding requires. Loading
it at serving time is ``minispec.transformers_utils.tokenizer``.
"""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models

UNK, EOS = "<unk>", "<eos>"
SPECIAL_TOKENS = [UNK, EOS]


def build_tokenizer(text: str) -> Tokenizer:
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(set(text)):
        vocab[ch] = len(vocab)
    # BPE with no merges splits text into single characters; Fuse joins them
    # back without the spaces a plain decode would insert.
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(SPECIAL_TOKENS)
    return tok
