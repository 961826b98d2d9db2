"""The two runner faults of July 2025 as switches, and their presets.

* ``readd_spec_tokens`` (fix 1, vLLM v0.14.0, PR #31944): when a cached request is
  re-added to the persistent batch, write its scheduled draft tokens into its row,
  as the in-batch path does.
* ``sync_accepted_tokens`` (fix 2): under pipeline parallelism the scheduler sends
  a non-last stage only the bonus token; the drafts accepted last step never reach
  it. With the fix, the stage takes the accepted ones from the drafts it was
  given last step, so its token history stays complete.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunnerFixes:
    readd_spec_tokens: bool = True
    sync_accepted_tokens: bool = True


PRESETS = {
    "vllm-0.9.2": RunnerFixes(readd_spec_tokens=False, sync_accepted_tokens=False),
    "vllm-0.14": RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=False),
    "all": RunnerFixes(readd_spec_tokens=True, sync_accepted_tokens=True),
}


def resolve_fixes(fixes: str | RunnerFixes) -> RunnerFixes:
    if isinstance(fixes, RunnerFixes):
        return fixes
    if fixes not in PRESETS:
        raise ValueError(f"fixes={fixes!r}: expected one of {sorted(PRESETS)} or a RunnerFixes")
    return PRESETS[fixes]
