"""Draw the docs site's stepper frames: the build step `make docs` runs first.

Each notebook page with a linked stepper has a recipe here that makes the same
runs the notebook makes (``SITE_STEPPERS``). For each, the frames go to
``OUT/static/stepper/<id>/<preset>/<step>-<stage>-{strip,gantt}.png`` (the site's
``_static/stepper/<id>/``) and the manifest, with the frames' sizes, to
``OUT/steppers.json`` ({page: manifest}), which the
site's Sphinx extension (``docs/_ext/minispec_site.py``) puts on the page. Frames
are drawn again only when the recorded runs or the renderers changed: when no
source of minispec changed the runs are not even made (digests of both are kept
beside the frames), so an unchanged tree costs nothing, and a change elsewhere in
minispec costs the few seconds the runs take.

    python tools/stepper_frames.py --out build/docs-frames [--jobs 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import shutil
import sys
import time
from pathlib import Path

# this clone's minispec, as docs/conf.py documents it, whichever one the venv installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import minispec  # noqa: E402
from minispec.config import DEFAULT_TARGET  # noqa: E402
from minispec.lab.evidence import SMALLEST_START, smallest_break_runs  # noqa: E402
from minispec.lab.viz.static_stepper import render_frames, stepper_manifest  # noqa: E402
from minispec.lab.viz.stepper import thread_runs  # noqa: E402
from minispec.lab.viz.text import char_decoder  # noqa: E402
from minispec.transformers_utils.tokenizer import load_tokenizer  # noqa: E402


def thread_stepper():
    """``01_the_thread``'s stepper: ``trace_stepper(thread_runs(), decode=cell, step=2)``."""
    return thread_runs(), char_decoder(load_tokenizer(DEFAULT_TARGET), visible_spaces=True), {"step": 2}


def explorer_stepper():
    """``06_invariants_as_a_debugger``'s stepper, inside the reveal of its "smallest schedule"
    prediction: the explorer's minimal counterexample for ``"vllm-0.9.2"``, under that preset and
    under every fix, as the reveal's evidence makes it."""
    _, runs, decode = smallest_break_runs()
    return runs, decode, dict(SMALLEST_START)


SITE_STEPPERS = {"notebooks/01_the_thread": thread_stepper,
                 "notebooks/06_invariants_as_a_debugger": explorer_stepper}


RENDERERS = ("gantt", "palette", "plots", "static_stepper", "stepper", "stepper_figures", "strip", "text")


def digest(paths, extra: bytes = b"") -> str:
    h = hashlib.sha256(extra)
    for path in paths:
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def code_digest() -> str:
    """minispec's sources and shipped models: if none changed, nothing can have."""
    package = Path(minispec.__file__).parent
    models = "".join(f"{p.relative_to(package)}:{p.stat().st_size};"  # large: names and sizes
                     for p in sorted((package / "checkpoints").rglob("*")))
    return digest(sorted(package.rglob("*.py")), models.encode())


def frames_digest(runs) -> str:
    """What the frames are drawn from: the recorded runs and the renderers' code."""
    viz = Path(minispec.__file__).parent / "lab" / "viz"
    recorded = pickle.dumps({name: (run.trace, run.timeline) for name, run in runs.items()})
    return digest([viz / f"{name}.py" for name in RENDERERS], recorded)


def build(out: Path, jobs: int) -> dict:
    """Each page's manifest (with frame sizes), drawing the frames that are missing or stale."""
    site, code = {}, code_digest()
    for page, recipe in SITE_STEPPERS.items():
        stamp = out / "drawn" / f"{page.replace('/', '_')}.json"
        drawn = json.loads(stamp.read_text()) if stamp.exists() else {}
        folder = out / "static" / "stepper" / drawn.get("manifest", {}).get("id", "-")
        if not (drawn.get("code") == code and folder.is_dir()):  # some code changed: did the runs?
            runs, decode, start = recipe()
            frames = frames_digest(runs)
            if not (drawn.get("frames") == frames and folder.is_dir()):
                drawn = draw(runs, decode, stepper_manifest(runs, decode, **start), out, jobs)
                drawn["frames"] = frames
            drawn["code"] = code
            stamp.parent.mkdir(parents=True, exist_ok=True)
            stamp.write_text(json.dumps(drawn, ensure_ascii=False))
        site[page] = drawn["manifest"]
        print(f"{page}: stepper {site[page]['id']}, {site[page]['files']} frames in "
              f"{out / 'static' / 'stepper' / site[page]['id']}")
    for old in (out / "static" / "stepper").iterdir():  # frames of stops no page shows any more
        if old.name not in {m["id"] for m in site.values()}:
            shutil.rmtree(old)
    (out / "steppers.json").write_text(json.dumps(site, ensure_ascii=False))
    return site


def draw(runs, decode, manifest: dict, out: Path, jobs: int) -> dict:
    folder = out / "static" / "stepper" / manifest["id"]
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    sized = render_frames(runs, decode, manifest, folder, jobs)
    took = time.perf_counter() - start
    print(f"stepper {manifest['id']}: drew {sized['files']} frames, {sized['bytes'] / 1e6:.1f} MB, in {took:.0f} s "
          f"with {jobs} processes")
    return {"manifest": sized, "seconds": round(took, 1)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("build/docs-frames"))
    parser.add_argument("--jobs", type=int, default=2, help="processes drawing frames (default 2)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs: expected a positive number of processes, got {args.jobs}")
    args.out.mkdir(parents=True, exist_ok=True)
    build(args.out, args.jobs)


if __name__ == "__main__":
    main()
