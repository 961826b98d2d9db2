"""What gives fix 1's and fix 2's answers away, declared once: the handout (``docs/handout.md``)
must show none of it, the answers slip (``docs/answers_slip.md``, read at the wrap-up) shows it,
and the spoiler check (``tools/spoilers.py``) can count these among each question's answers.

``ANSWERS`` maps a question id of ``notebooks/08_exercises.ipynb`` (its cells' ``"asks"``) to
regular expressions for the answer as prose or code would state it. They are matched by
``gives_away`` against text with its whitespace squeezed; backticks are optional in each, so a
pattern finds ``num_tokens_no_spec`` in markdown and in plain text alike. The reference
solutions themselves are in ``solutions``.

No vLLM twin: this is workshop material.
"""

from __future__ import annotations

import re

ANSWERS: dict[str, tuple[str, ...]] = {
    # Fix 1: where the drafts go, and that num_tokens counts them.
    "fix1": (
        r"writes? (the )?drafts at `?num_tokens_no_spec",
        r"on re-add too",
        r"advanc\w* `?num_tokens`?(?!_)",
        r"count\w* them in `?num_tokens`?(?!_)",
        r"token_ids_cpu\[\s*row\s*,\s*(start|num_tokens_no_spec)",
        r"num_tokens\[\s*row\s*\]\s*\+?=\s*(start|num_tokens_no_spec|len\(spec_token_ids\))",
    ),
    # Fix 2: the accepted drafts are a prefix of those the stage was given, then the relayed tokens;
    # a resumed request takes only the end of its recompute chunk.
    "fix2": (
        r"accepted (drafts|ones)[^.\n]{0,40}\bprefix\b",
        r"\bprefix of[^.\n]{0,30}(drafts|spec_token_ids)",
        r"takes? the accepted drafts from",
        r"spec_token_ids`?\[\s*:",
        # not ``new_token_ids[-...]`` alone: vLLM's own faulty line, quoted before the question, has it
        r"new_token_ids`?\[\s*[-−]\s*behind",
        r"part of the recompute chunk past",
    ),
}


def gives_away(text: str) -> list[tuple[str, str]]:
    """(question id, the words found) for each answer ``text`` states."""
    squeezed = " ".join(text.split())
    return [(qid, m.group(0)) for qid, patterns in ANSWERS.items() for p in patterns
            if (m := re.search(p, squeezed, flags=re.I))]
