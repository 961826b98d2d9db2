"""The linked stepper without a kernel: its stops as data and its frames as files.

A saved ipywidget is a frozen picture: its buttons click but no Python runs. For
the docs site, a stepper is therefore turned into a *manifest* (every stop's
label, position and scheduler text, exactly as ``stepper.stepper_view`` gives
them to the live widget) and *frames* (every stop's strip and Gantt, drawn by
``stepper_figures`` as the widget draws them, and the projector view's one-stage strip, stored as 256-colour PNGs: 64
colours shifted the legend's colours). A small script on the site
(``docs/_static/minispec-stepper.js``) moves through the manifest with the
widget's rules: next / prev go one stop, the slider and the stage toggle go to
the nearest recorded stop, the preset toggle keeps the step and stage.

The manifest's ``id`` is a digest of what the stops say, so a notebook's stored
placeholder (``placeholder_html``) names the frames it needs, and a site built
from newer code can tell that the notebook's stored stepper is out of date.
No vLLM twin.
"""

from __future__ import annotations

import hashlib
import html
import json
import multiprocessing
from io import BytesIO
from pathlib import Path

from minispec.instruments.invariants import check_trace
from minispec.lab.viz.stepper import Run, stepper_view, stops
from minispec.lab.viz.stepper_figures import StepperFigures

COLOURS = 256


def stepper_manifest(runs: dict[str, Run], decode=str, preset: str | None = None, step: int = 0,
                     stage: int = 0) -> dict:
    """Every stop of every preset as [step, stage, label, position, text], the
    stepper's first stop, and an ``id`` that digests the stops."""
    presets = {}
    for name, run in runs.items():
        violations = check_trace(run.trace)
        views = [stepper_view(runs, name, s, st, decode, violations) for s, st in stops(run.trace)]
        presets[name] = [[v.step, v.stage, v.label, v.position, v.text] for v in views]
    num_stages = max(run.trace.pipeline_parallel_size for run in runs.values())
    first = preset or next(iter(runs))
    start = stepper_view(runs, first, step, stage, decode, check_trace(runs[first].trace))
    body = json.dumps({"presets": presets, "stages": num_stages}, sort_keys=True, ensure_ascii=False)
    return {"id": hashlib.sha256(body.encode()).hexdigest()[:16], "presets": presets, "stages": num_stages,
            "start": {"preset": first, "step": start.step, "stage": start.stage}}


def placeholder_html(manifest: dict) -> str:
    """The ``text/html`` the live stepper's output also carries: where no kernel
    runs, the docs site puts its static stepper here."""
    return (f'<div class="minispec-stepper" data-stepper="{manifest["id"]}"><p><i>The linked stepper: run the '
            "notebook in JupyterLab to use it, or read it on the docs site (<code>make docs</code>), where it "
            "works without a kernel.</i></p></div>")


def frame_name(preset: str, step: int, stage: int, figure: str) -> str:
    return f"{preset}/{step}-{stage}-{figure}.png"


def site_html(manifest: dict, frames_url: str) -> str:
    """The static stepper for a page: the manifest inline (so it reads from a file
    too) and where its frames are, relative to the site's root."""
    data = json.dumps({**manifest, "frames": frames_url}, ensure_ascii=False).replace("</", "<\\/")
    first = manifest["start"]
    return (f'<div class="minispec-stepper" data-stepper="{manifest["id"]}">'
            f'<script type="application/json" class="minispec-stepper-data">{data}</script>'
            f'<noscript><p>The stepper needs JavaScript. Its first stop: '
            f'{html.escape(_stop(manifest, **first)[2])}.</p></noscript></div>')


def _stop(manifest: dict, preset: str, step: int, stage: int) -> list:
    return next(s for s in manifest["presets"][preset] if s[:2] == [step, stage])


# set before the pool forks, read by its workers: the laptop's figures, the projector's, the manifest, the folder
_WORK: tuple[StepperFigures, StepperFigures, dict, Path] | None = None


def _quantized(png: bytes) -> bytes:
    from PIL import Image

    out = BytesIO()
    Image.open(BytesIO(png)).convert("RGB").quantize(COLOURS).save(out, format="png", optimize=True)
    return out.getvalue()


def _render(job: tuple[str, int, int]) -> tuple[int, int]:
    """Draw one stop's frames into the output folder; their sizes in bytes."""
    figures, projector, manifest, out = _WORK
    preset, step, stage = job
    row = _stop(manifest, preset, step, stage)
    view = stepper_view(figures.runs, preset, step, stage, figures.decode, [])  # figures need no violations
    assert view.label == row[2], "the frames must be drawn for the stops the manifest lists"
    sizes = []
    # the projector view's strip: the stop's stage alone, larger, no legend (as the live widget's projector mode)
    frames = (*figures.pngs(view), projector.pngs(view)[0])
    for figure, png in zip(("strip", "gantt", "projector"), frames):
        if png is not None:
            path = out / frame_name(preset, step, stage, figure)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_quantized(png))
            sizes.append(path.stat().st_size)
    return sum(sizes), len(sizes)


def render_frames(runs: dict[str, Run], decode, manifest: dict, out: Path, jobs: int = 2) -> dict:
    """Every stop's frames under ``out``; returns the manifest with the frames'
    pixel sizes added (``strip``, ``gantt``, ``projector``), as the page lays them out."""
    global _WORK
    figures, projector = StepperFigures(runs, decode), StepperFigures(runs, decode, projector=True)
    start = manifest["start"]
    view = stepper_view(runs, start["preset"], start["step"], start["stage"], decode, [])  # for the sizes only
    gantt = figures.gantt(view)
    sized = {**manifest, "strip": figures.size(figures.strip(view)),
             "gantt": None if gantt is None else figures.size(gantt), "projector": projector.size(projector.strip(view))}
    _WORK = figures, projector, manifest, Path(out)
    todo = [(name, s[0], s[1]) for name, rows in manifest["presets"].items() for s in rows]
    try:
        if jobs > 1:  # fork: the workers inherit the runs instead of pickling them
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                done = pool.map(_render, todo, chunksize=4)
        else:
            done = [_render(job) for job in todo]
    finally:
        _WORK = None
    sized["bytes"], sized["files"] = sum(b for b, _ in done), sum(n for _, n in done)
    return sized
