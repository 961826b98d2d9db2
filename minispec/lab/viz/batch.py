"""A persistent batch, printed: pure functions for notebook 03.

``render_batch`` prints an ``InputBatch``'s ``token_ids_cpu`` one character per
position, row by row, free rows included (their tokens are still there), with
each row's request id, ``num_tokens_no_spec`` and ``num_tokens`` and a marker
line under it. ``render_gather`` prints what ``_prepare_inputs`` gathered: per
request, the positions it read and the token it found at each. Every stage
gathers this way from its own batch: stage 0 embeds what it reads, and the last
stage also hands the draft slots to the rejection sampler.
"""

from __future__ import annotations

import numpy as np

NEVER_WRITTEN = "·"  # token id 0: the slot still holds the zero it was allocated with
LEGEND = ("^ = slot num_tokens_no_spec, the first after the token history. ^ followed by + = slots\n"
          "num_tokens_no_spec .. num_tokens - 1: drafts, counted in num_tokens only. · = token id 0, never written")


def _cell(token_id: int, decode) -> str:
    """Exactly one character, so that every row lines up with the position ruler."""
    if token_id == 0:
        return NEVER_WRITTEN
    label = decode(int(token_id))
    return label if len(label) == 1 else "?"


def _ruler(width: int, indent: int) -> list[str]:
    tens = "".join(str(p // 10 % 10) if p % 10 == 0 else " " for p in range(width))
    units = "".join(str(p % 10) for p in range(width))
    return [" " * (indent - 9) + "position " + tens, " " * indent + units]


def render_batch(batch, decode, rows: int | None = None, width: int | None = None, title: str = "") -> str:
    """``token_ids_cpu[:rows, :width]`` of an ``InputBatch``, one line per row plus markers.

    Occupied rows show ``row, req id, num_tokens_no_spec, num_tokens``; free rows
    show ``(free)`` and keep their old tokens, which is the point.
    """
    rows = batch.max_num_reqs if rows is None else rows
    width = batch.token_ids_cpu.shape[1] if width is None else width
    if not 0 < rows <= batch.max_num_reqs:
        raise ValueError(f"rows={rows!r}: expected 1 to max_num_reqs={batch.max_num_reqs}")
    occupant = {row: req_id for req_id, row in batch.req_id_to_index.items()}
    head = f"{'row':<4}{'req':<8}{'no_spec':>7}{'tokens':>7}  "
    lines = [title] if title else []
    lines += _ruler(width, len(head))
    lines[-1] = head + lines[-1][len(head):]
    for row in range(rows):
        cells = "".join(_cell(t, decode) for t in batch.token_ids_cpu[row, :width])
        req_id = occupant.get(row)
        if req_id is None:
            lines.append(f"{row:<4}{'(free)':<8}{'-':>7}{'-':>7}  {cells}")
            continue
        no_spec, total = int(batch.num_tokens_no_spec[row]), int(batch.num_tokens[row])
        lines.append(f"{row:<4}{req_id:<8}{no_spec:>7}{total:>7}  {cells}")
        marks = [" "] * width
        for pos in range(no_spec, min(max(total, no_spec + 1), width)):
            marks[pos] = "^" if pos == no_spec else "+"
        lines.append(" " * len(head) + "".join(marks).rstrip())
    return "\n".join(lines)


def render_gather(batch, inputs, decode) -> str:
    """What ``_prepare_inputs`` read: per row of ``batch``, each scheduled position
    and the token found there in ``token_ids_cpu``, the drafts among them marked."""
    positions = np.asarray(inputs.positions)
    input_ids = np.asarray(inputs.input_ids)
    lines, start = [], 0
    for row, req_id in enumerate(batch.req_ids):
        n = int(inputs.num_scheduled[row])
        drafts = len(inputs.verified_drafts[row])
        pos, ids = positions[start : start + n], input_ids[start : start + n]
        start += n
        shown = " ".join(f"{p}:{_cell(t, decode)}" for p, t in zip(pos, ids))
        lines.append(f"row {row} {req_id}: reads positions {pos[0]}..{pos[-1]} -> {shown}")
        if drafts:
            slots = "".join(_cell(t, decode) for t in ids[n - drafts :])
            lines.append(f"      the last {drafts} are the draft slots: [{slots}] "
                         "(what this stage embeds; the last stage gathers and verifies the same way)")
    return "\n".join(lines)
