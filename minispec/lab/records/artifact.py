"""What notebook 07 shows of vLLM's own code, stored so that learners need no vLLM.

``artifacts/thread.json`` holds two moments of the forum thread, as vLLM's own
``InputBatch`` held them beside minispec's:

* ``stale_drafts``: vLLM 0.9.2 on the ``vllm-0.9.2`` schedule, stage 0 at
  step 2, request A's row of ``token_ids_cpu`` (its draft slots hold C's ``tem``);
* ``short_history``: vLLM 0.14.0 on the ``all`` schedule (both fixes), stage 0
  at step 4: A's ``output_token_ids`` there are short (fault 2, still in 0.14.0).

With each, its provenance: the vLLM version, the sha256 of the files run, the
line ranges of the methods executed, and the command that made it. This module
only reads and renders it (pure, artifact -> str); the harness outside the
package (``reference/artifact.py``, run by ``make vllm-check``) writes it, and
``tests/test_vllm_reference.py`` fails if a rebuilt one differs from the stored one.
vLLM twin: none.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

ARTIFACT = Path(__file__).with_name("artifacts") / "thread.json"


def load_artifact(path: Path = ARTIFACT) -> dict:
    return json.loads(path.read_text())


def _tokens(ids, decode) -> str:
    return " ".join(map(str, ids)) if decode is None else "".join(decode(t) for t in ids)


def render_moment(m: dict, decode=None) -> str:
    """One moment: both rows up to the step's last input, the draft slots marked."""
    first_draft = m["num_computed_tokens"] + m["num_scheduled_tokens"] - len(m["scheduled_drafts"])
    lines = [f"step {m['step']}, stage {m['stage']}, request {m['request']}: "
             f"vLLM {m['vllm_release']} on minispec's '{m['preset']}' schedule"]
    for who, side in (("vLLM " + m["vllm_release"], m["vllm"]), (f"minispec {m['preset']}", m["minispec"])):
        row = side["token_ids_cpu_row"]
        lines.append(f"  {who:<19} row {side['row']} token_ids_cpu=[{_tokens(row[:first_draft], decode)}"
                     f"|{_tokens(row[first_draft:], decode)}]  output_token_ids={len(side['output_token_ids'])} "
                     f"tokens [{_tokens(side['output_token_ids'], decode)}]")
    if m["scheduled_drafts"]:
        lines.append(f"  {'scheduled':<19} drafts after '|': [{_tokens(m['scheduled_drafts'], decode)}]")
    lines.append(f"  request's own tokens: [{_tokens(m['request_tokens'], decode)}]")
    return "\n".join(lines)


def render_provenance(provenance: dict) -> str:
    """The code run (with Model Runner V2's: Triton, and what was stood in for, and why)."""
    triton = f" (Triton {provenance['triton']})" if "triton" in provenance else ""
    lines = [f"vLLM {provenance['vllm_version']}, run as its own code{triton}:"]
    lines += [f"  {name} ({where})" for name, where in provenance["executed"].items()]
    lines += [f"  sha256 {digest[:16]}… {path}" for path, digest in provenance["sha256"].items()]
    if provenance.get("stand_ins"):
        lines.append("  stood in for:")
        lines += [f"    {name}: {why}" for name, why in provenance["stand_ins"].items()]
    return "\n".join(lines)


def render_sources(artifact: dict) -> str:
    """How the artifact was made: the vLLM code run, its file hashes, the command."""
    blocks = [f"made by {artifact['made_by']}"]
    blocks += [textwrap.indent(render_provenance(m["provenance"]), "  ") for m in artifact["moments"].values()]
    blocks.append(f"  reproduce: {artifact['command']}")
    return "\n".join(blocks)


def render_artifact(artifact: dict, decode=None) -> str:
    """Both moments and where they came from: pure, artifact -> str."""
    return "\n\n".join([render_moment(m, decode) for m in artifact["moments"].values()] + [render_sources(artifact)])
