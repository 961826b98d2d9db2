"""Builds what notebook 07 shows of vLLM's own code: ``minispec/lab/records/artifacts/thread.json``.

``build_artifact(result)`` takes two moments of the forum thread out of a
``run.CheckResult`` (``MOMENTS``: which release, preset, step, stage and request)
with their provenance; ``python -m reference --write-artifact`` stores it, and
``minispec.lab.records.artifact`` (in the package) reads and renders it.
vLLM twin: none.
"""

from __future__ import annotations

import json
from pathlib import Path

from minispec.lab.records.artifact import ARTIFACT

COMMAND = "make vllm-check   (python -m reference --write-artifact)"
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
                   "scheduler outputs (reference, beside the package)",
        "command": COMMAND,
        "moments": {name: _moment(result, *spec) for name, spec in MOMENTS.items()},
    }


def dumps(artifact: dict) -> str:
    return json.dumps(artifact, indent=1) + "\n"


def write_artifact(result) -> Path:
    """Stores ``build_artifact(result)`` where the package reads it; returns that path."""
    ARTIFACT.write_text(dumps(build_artifact(result)))
    return ARTIFACT
