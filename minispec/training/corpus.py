"""The training text: CPython's own ``pydoc_data.topics``, so nothing is downloaded.

The topics are joined in sorted key order, which makes the corpus a pure function
of the CPython version (3.11.7 produced the shipped checkpoints). The last 5% of
characters are held out for evaluation.
"""

from __future__ import annotations

HELDOUT_FRACTION = 0.05


def full_text() -> str:
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


def split_text() -> tuple[str, str]:
    """Return ``(train, heldout)``."""
    text = full_text()
    cut = int(len(text) * (1 - HELDOUT_FRACTION))
    return text[:cut], text[cut:]
