"""One step scheduled ahead, as text: what the scheduler held and scheduled for a request
(its placeholders), what stage 0 put in their place, and what came back. A pure function,
``AheadStep -> str`` (the run: ``minispec.lab.experiments.async_scheduling``).

No vLLM twin.
"""

from __future__ import annotations

from minispec.lab.experiments.async_scheduling import AheadStep

TAIL = 8  # characters of the scheduler's tokens shown


def _text(ids, decode) -> str:
    return repr("".join(map(decode, ids)))


def render_ahead(step: AheadStep, decode, in_flight_at_most: int) -> str:
    """``decode``: token id -> text; ``in_flight_at_most``: the engine's ``max_concurrent_batches``."""
    s, e, r = step.scheduled, step.embedded, step.req_id
    others = [x for x in s.in_flight if x != s.step]
    waiting = f"while steps {', '.join(map(str, others))} were in flight" if others else "with no other step in flight"
    lines = [f"step {s.step}, request {r}: scheduled {waiting} ({len(s.in_flight)} with it; at most {in_flight_at_most})",
             f"  the scheduler holds {len(s.known_tokens)} of {r}'s tokens, ending …{_text(s.known_tokens[-TAIL:], decode)}",
             f"  it schedules {s.num_scheduled_tokens} tokens, drafts {list(s.drafts)}; "
             f"num_output_placeholders={s.num_output_placeholders}"]
    if e is not None:
        lines.append(f"  stage 0 ran step {s.step} on last sampled {_text([e.last_sampled_token], decode)} "
                     f"and drafts {_text(e.draft_tokens, decode)}")
    lines.append(f"  back at step {s.step}'s update: {_text(step.returned, decode)}")
    return "\n".join(lines)
