"""Write ``docs/invariants.md`` from ``minispec.instruments.invariants`` and the trace's records.

The rules come from the ``Invariant`` members, the record tables from the
dataclasses in ``minispec.instruments.trace`` (each field's type and the comment
beside or above it), and the worked example is run here, so the page shows what
it prints. ``tests/test_invariants_doc.py`` checks that the committed page is
what this writes and runs the example from the page.

    python tools/invariants_doc.py          # rewrite docs/invariants.md
    python tools/invariants_doc.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import io
import re
import sys

from generated import ROOT, command

sys.path.insert(0, str(ROOT))

from minispec.instruments import trace as records  # noqa: E402
from minispec.instruments.invariants import Invariant  # noqa: E402

DOC = ROOT / "docs" / "invariants.md"
RECORDS = {  # each record, and when a runner makes it
    records.RowRecord: "One request's row (or slot) on one stage, read from that stage's own buffers.",
    records.StageRecord: "One stage at one step, after it gathered its inputs and before its forward.",
    records.ScheduleRecord: "What the scheduler sent at one step, and what it believed then.",
    records.StepRecord: "One step: its schedule, every stage's record, and the update that came back.",
    records.Trace: "A whole run: the steps, and the events in the order they happened.",
}
FIELD = re.compile(r"^\s+(\w+): [^#]*?(?:#\s*(.*))?$")

INTRO = """\
# The invariants

<!-- Written by tools/invariants_doc.py from minispec/instruments/invariants.py and
minispec/instruments/trace.py: edit those, then run the tool. -->

minispec states nine rules that speculative decoding under pipeline parallelism must keep.
The numbers are the ones the notebooks and the tests cite. Rules 2-5 and 8 are checked on the
records of every step: live, `LLM(..., check_invariants=True)` raises `InvariantViolation` at
the first break; offline, `check_trace(trace)` lists every break of a recorded run. Rules 1
and 6 compare whole runs with references, so the tests check them; rule 7 is checked by the
transport on every message. Rule 8 is about state that is not tokens: it applies only when the
drafter reads the target's hidden states from other stages (an EAGLE-3 head's taps), and a stage
records each tap as a digest per position (`tap_digests`); its hand-worked case is
`tests/test_eagle.py::test_invariant_8_by_hand`.

Each of rules 2-5 has a sentence for async scheduling (`async_scheduling=True`). There the
scheduler schedules a request again before the output of its batch in flight is back: it
counts that output's tokens as placeholders (`num_output_placeholders`), sends `-1` for each
draft, and counts every draft of that batch as accepted. What a stage must hold is then not
in the schedule but in the outputs it was scheduled without, and the checker compares it
once they are back ([Under async scheduling](#under-async-scheduling)). A synchronous run
has no placeholders, so these sentences never apply to it.
"""

ASYNC = """\
## Under async scheduling

The checker finds the batches a step waits for from the records: when a batch that samples
a request is scheduled, the batches still in flight that sample it are the ones it was
scheduled without (rule 5 checks that the scheduler counted their placeholders, and only
theirs). A stage that runs such a step is held to those outputs' view of the request
(`resolved_view` in `minispec/instruments/invariants.py`): the scheduler's
`num_computed_tokens` less the drafts they rejected (`StepRecord.num_accepted`), its
`all_token_ids` after the last of them (`StepRecord.all_token_ids_after`), and the drafts that
one brought (`StepRecord.spec_token_ids`). Live, a stage whose outputs are not back yet is
checked by `check_update` when they are, and the violation still names the stage's own step,
stage and request. A step that a request's finishing output makes useless
(`StepRecord.finished`) is dropped by the scheduler and not checked.

A worked case (`tests/test_invariants_async.py`): V1 at one stage, two batches in flight,
k = 2, request A with prompt `[10, 11, 12, 13, 14]`, whose greedy continuation on the stand-in
model is `T = [29, 44, 73, 40, 18, 20, ...]`. Step 3 is scheduled when steps 0 and 1 are back
and step 2 is not: the schedule says 10 tokens computed (step 2's two drafts counted as
accepted), `all_token_ids` = prompt + `[29, 44, 73]`, drafts `[-1, -1]` and 6 placeholders
(1 + 2 for step 2, 1 + 2 for step 3). Step 2 rejects both its drafts and brings `[18, 20]`, so
stage 0 must hold, at step 3: 8 tokens computed, history prompt + `[29, 44, 73, 40]`, drafts
`[18, 20]`; it embeds `[40, 18, 20]`.
"""

CONFORMANCE = """\
## The checker as a conformance test

Nothing in `check_trace` knows minispec's runner: it reads plain records. Any runner that
keeps per-request state on several pipeline stages (vLLM's V1 persistent batch, a V2-style
slot table, a design of your own) can be checked by recording the same snapshots:

1. After each `schedule()`, a `ScheduleRecord`: what the scheduler sent and what it believes
   (`num_computed_tokens` as it was *before* this schedule advanced it, `all_token_ids`, and
   under async scheduling its `num_output_placeholders`).
2. On every stage, after it has brought its state up to date and gathered its inputs, before
   its forward: a `StageRecord` with one `RowRecord` per request it holds, read from the
   stage's own buffers (its copy of the token ids, its counts, its block table), never from
   the scheduler. A runner whose state is a slot table rather than rows records each slot's
   request as a row, with its `slot`.
3. After `update_from_output`: on the step's `StepRecord`, the drafts accepted per request
   and the scheduler's `num_computed_tokens` just before and just after; for async
   scheduling also its `all_token_ids` just after, the drafts the output brought and the
   requests it finished.
4. In `Trace.events`, each of those as it happened (a schedule, a stage, an update), so that
   rule 5 sees which batches were in flight together.

Then `check_trace(trace)` returns a `Violation` per break (its `invariant` is an `Invariant`
member; `step`, `stage`, `req_id`, `expected`, `actual` say where and what). To check as you
go, call an `InvariantChecker`'s `check_schedule`, `check_stage` and `check_update` at the
same three points, as minispec's `TraceRecorder` does. Fields that no rule reads may be left
at their defaults. A runner design inside minispec gets all of this by implementing the runner
contract, `WorkerBase` ([adding a runner design](adding_a_runner.md)): its `describe_rows`
gives the rows of point 2, and the engine and the recorder do the rest.

minispec runs this one checker, live (`check_invariants=True`), on all four of its designs:
V1's persistent batch, Model Runner V2's slots and broadcast, SGLang's relay around the ring
and replicated drafting (`model_runner="relay"`, `"replicated"`, `minispec/v1/worker/relay/`).
The two relay designs added no line to the checker (`minispec/instruments/invariants.py` names
no design, `tests/test_invariants.py` checks so): their stages record slot rows through the
same contract, every design's recorded run is clean, and the checker catches the relay's own
faults (`relay-pairing`, `relay-no-seq-lens`, `tests/test_fault_presets.py`) as it catches
V1's and V2's. What still differs between designs is data, not a branch: a row that carries a
`slot` is named by it in messages (`slot 3's all_token_ids[:11]` rather than
`token_ids_cpu[0, :11]`), and its previous occupant is tracked by that slot rather than by its
row (`RowRecord.buffer_index`); both read the record, never the design's name.
"""

EXAMPLE = '''\
from minispec.instruments.events import Event, EventKind
from minispec.instruments.invariants import Invariant, check_trace
from minispec.instruments.trace import RowRecord, ScheduleRecord, StageRecord, StepRecord, Trace

# Request A: prompt [1, 2, 3] and one token out (4). This step decodes it with the
# drafts [5, 6]: 1 + 2 tokens, scheduled from position 3.
schedule = ScheduleRecord(
    step=0, num_scheduled_tokens={"A": 3}, scheduled_spec_decode_tokens={"A": [5, 6]},
    new_token_ids={"A": [4]}, num_computed_tokens={"A": 3}, all_token_ids={"A": [1, 2, 3, 4]},
    new_req_ids=[], num_prompt_tokens={"A": 3})


def row(token_ids):
    """What a stage holds for A once it has gathered this step's inputs."""
    return RowRecord(row=0, req_id="A", path="stayed", token_ids=token_ids, num_tokens=6,
                     num_tokens_no_spec=4, num_computed_tokens=3, num_scheduled_tokens=3, num_drafts=2)


stages = [  # stage 0 never wrote the first draft: its slot still holds 9
    StageRecord(step=0, stage=0, is_last=False, rows=[row([1, 2, 3, 4, 9, 6])],
                input_ids=[4, 9, 6], verified_drafts={}),
    StageRecord(step=0, stage=1, is_last=True, rows=[row([1, 2, 3, 4, 5, 6])],
                input_ids=[4, 5, 6], verified_drafts={"A": [5, 6]}),
]
# The last stage accepted 5 and rejected 6, so num_computed_tokens goes back from 6 to 5.
step = StepRecord(schedule, stages, num_accepted={"A": 1},
                  num_computed_before_update={"A": 6}, num_computed_after={"A": 5})
trace = Trace(fixes="my runner", pipeline_parallel_size=2, steps=[step],
              events=[Event(EventKind.SCHEDULE, 0), Event(EventKind.STAGE, 0, stage=0),
                      Event(EventKind.STAGE, 0, stage=1), Event(EventKind.UPDATE, 0)])

for violation in check_trace(trace):
    print(violation)
assert [(v.invariant, v.step, v.stage, v.req_id) for v in check_trace(trace)] == [
    (Invariant.DRAFT_AGREEMENT, 0, 0, "A")]
'''


def field_notes(cls) -> dict[str, str]:
    """Each field's comment: the one on its line, else the comment lines just above it."""
    notes, above = {}, []
    for line in inspect.getsource(cls).splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
        elif match := FIELD.match(line):
            notes[match.group(1)] = match.group(2) or " ".join(above)
            above = []
        else:
            above = []
    return notes


def readers(cls_name: str, field: str) -> str:
    return ", ".join(str(i) for i in Invariant if f"{cls_name}.{field}" in i.reads) or "—"


def record_table(cls) -> str:
    notes = field_notes(cls)
    lines = [f"### `{cls.__name__}`", "", RECORDS[cls], "",
             "| field | type | read by rule | what it holds |", "|---|---|---|---|"]
    props = [name for name, value in vars(cls).items() if isinstance(value, property)]
    for f in dataclasses.fields(cls):
        note = notes.get(f.name, "").replace("|", "\\|")
        kind = str(f.type).replace("|", "\\|")
        lines.append(f"| `{f.name}` | `{kind}` | {readers(cls.__name__, f.name)} | {note} |")
    for name in props:
        doc = (inspect.getdoc(getattr(cls, name)) or "").replace("\n", " ")
        lines.append(f"| `{name}` (property) | | {readers(cls.__name__, name)} | {doc} |")
    return "\n".join(lines)


def rule_section(i: Invariant) -> str:
    reads = ", ".join(f"`{r}`" for r in i.reads) if i.reads else "whole runs, not a trace"
    return f"## {int(i)}. {i.title}\n\n{i.rule}\n\n- Checked by: {i.where}.\n- Reads: {reads}.\n"


def run_example() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(EXAMPLE, "docs/invariants.md", "exec"), {"__name__": "invariants_example"})
    return out.getvalue()


def render() -> str:
    tables = "\n\n".join(record_table(cls) for cls in RECORDS)
    return "\n".join([
        INTRO, *(rule_section(i) for i in Invariant), ASYNC, CONFORMANCE,
        "### What to record\n\nEvery field of each record, its type, which rules read it, and the comment "
        "beside it in `minispec/instruments/trace.py`:\n", tables, "",
        "### A worked example\n\nA two-stage runner of your own, one decode step of one request, recorded by "
        "hand. Stage 0's row kept a stale token in a draft slot; the test suite runs this block "
        "(`tests/test_invariants_doc.py`).\n",
        f"```python\n{EXAMPLE}```\n", "It prints:\n", f"```text\n{run_example()}```\n",
    ])


def main(argv=None) -> int:
    return command(DOC, lambda: render(), "tools/invariants_doc.py", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
