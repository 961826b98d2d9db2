"""Plain-text renderings of Model Runner V2's slots and of the last stage's broadcast:
pure functions, ``record -> str``, over ``minispec.lab.experiments.v2_watch``'s records.

``decode`` turns one token id into a short label (a character for the shipped
tokenizer); by default ids are printed as numbers. No vLLM twin.
"""

from __future__ import annotations

from minispec.lab.experiments.v2_watch import BroadcastRecord, SlotSnapshot

TAIL = 8  # the last tokens of a slot's history shown; "…" marks that earlier ones are cut


def _tokens(ids, decode) -> str:
    if decode is None:
        return " ".join(str(t) for t in ids)
    return "".join(decode(t) for t in ids)


def render_slots(snapshot: SlotSnapshot, decode=None, req_ids=None) -> str:
    """One line per occupied slot (or only ``req_ids``'): history, counts, last sampled, drafts.
    The history's length is printed as ``total_len``, vLLM's name for it (``states.py``)."""
    rows = [r for r in snapshot.rows if req_ids is None or r.req_id in req_ids]
    lines = [f"stage {snapshot.stage}'s slots at step {snapshot.step}, before its forward:"]
    for r in rows:
        cut = "…" if len(r.token_ids) > TAIL else ""
        lines.append(f"  slot {r.slot} {r.req_id}: history {cut}{_tokens(r.token_ids[-TAIL:], decode)!r} "
                     f"(total_len={len(r.token_ids)}), num_computed_tokens={r.num_computed_tokens}, "
                     f"last_sampled_tokens={_tokens([r.last_sampled_token], decode)!r}, "
                     f"draft_tokens={_tokens(r.draft_tokens, decode)!r}")
    return "\n".join(lines)


def render_broadcast(record: BroadcastRecord, decode=None) -> str:
    """The three messages of one broadcast, one line per row of the batch."""
    lines = [f"the last stage's broadcast after step {record.step}:"]
    for i, req_id in enumerate(record.req_ids):
        n = int(record.num_sampled[i])
        drafts = "" if record.draft_tokens is None else f", draft_tokens={_tokens(record.draft_tokens[i], decode)!r}"
        lines.append(f"  row {i} (slot {record.slots[i]}, {req_id}): "
                     f"sampled_tokens={_tokens(record.sampled_tokens[i, :n], decode)!r} "
                     f"(+{record.sampled_tokens.shape[1] - n} padding), num_sampled={n}, "
                     f"num_rejected={int(record.num_rejected[i])}{drafts}")
    return "\n".join(lines)
