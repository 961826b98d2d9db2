"""What notebook 07 shows of vLLM's own code, stored so that learners need no vLLM.

``build_artifact(result)`` takes two moments of the forum thread out of a
``run.CheckResult``, as vLLM's own ``InputBatch`` held them beside minispec's:

* ``stale_drafts``: vLLM 0.9.2 on the ``vllm-0.9.2`` schedule, stage 0 at
  step 2, request A's row of ``token_ids_cpu`` (its draft slots hold C's ``tem``);
* ``short_history``: vLLM 0.14.0 on the ``all`` schedule (both fixes), stage 0
  at step 4: A's ``output_token_ids`` there are short (fault 2, still in 0.14.0).

With each, its provenance: the vLLM version, the sha256 of the files run, the
line ranges of the methods executed, and the command that made it.
``render_artifact`` is the pure renderer the notebook calls.
``tests/test_vllm_reference.py`` rebuilds it under ``make vllm-check`` and fails
if the stored one differs. vLLM twin: none.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from minispec.lab.vllm_reference.report import render_provenance

ARTIFACT = Path(__file__).with_name("artifacts") / "thread.json"
COMMAND = "make vllm-check   (python -m minispec.lab.vllm_reference --write-artifact)"
MOMENTS = {  # name -> (release, preset, step, stage, request)
    "stale_drafts": ("0.9.2", "vllm-0.9.2", 2, 0, "A"),
    "short_history": ("0.14.0", "all", 4, 0, "A"),
}


def _moment(result, release: str, preset: str, step: int, stage: int, req_id: str) -> dict:
    row = next(r for r in result.rows if (r.pairing.release, r.pairing.preset, r.pairing.scenario)
               == (release, preset, "thread"))
    capture = result.runs[("thread", preset)].captures["thread"]
    mine = next(s.buffers for s in capture.stage_steps if (s.step, s.stage) == (step, stage))
    theirs = next(r["buffers"] for r in row.vllm_steps["thread"] if (r["step"], r["stage"]) == (step, stage))
    schedule = capture.trace.step(step).schedule
    end = schedule.num_computed_tokens[req_id] + schedule.num_scheduled_tokens[req_id]

    def side(b: dict) -> dict:
        i = b["req_id_to_index"][req_id]
        return {"row": i, "token_ids_cpu_row": b["token_ids_cpu"][i][:end], "num_tokens": b["num_tokens"][i],
                "num_tokens_no_spec": b["num_tokens_no_spec"][i], "output_token_ids": b["output_token_ids"][req_id]}

    return {
        "vllm_release": release, "preset": preset, "step": step, "stage": stage, "request": req_id,
        "num_computed_tokens": schedule.num_computed_tokens[req_id],
        "num_scheduled_tokens": schedule.num_scheduled_tokens[req_id],
        "scheduled_drafts": schedule.scheduled_spec_decode_tokens.get(req_id, []),
        "request_tokens": schedule.all_token_ids[req_id],
        "vllm": side(theirs), "minispec": side(mine),
        "equal_stage_steps": f"{row.comparison.equal}/{row.comparison.total}",
        "first_difference": row.first.describe() if row.first else None,
        "provenance": row.provenance,
    }


def build_artifact(result) -> dict:
    return {
        "made_by": "running vLLM's own InputBatch and GPUModelRunner._update_states on minispec's recorded "
                   "scheduler outputs (minispec.lab.vllm_reference)",
        "command": COMMAND,
        "moments": {name: _moment(result, *spec) for name, spec in MOMENTS.items()},
    }


def dumps(artifact: dict) -> str:
    return json.dumps(artifact, indent=1) + "\n"


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


def render_sources(artifact: dict) -> str:
    """How the artifact was made: the vLLM code run, its file hashes, the command."""
    blocks = [f"made by {artifact['made_by']}"]
    blocks += [textwrap.indent(render_provenance(m["provenance"]), "  ") for m in artifact["moments"].values()]
    blocks.append(f"  reproduce: {artifact['command']}")
    return "\n".join(blocks)


def render_artifact(artifact: dict, decode=None) -> str:
    """Both moments and where they came from: pure, artifact -> str."""
    return "\n\n".join([render_moment(m, decode) for m in artifact["moments"].values()] + [render_sources(artifact)])
