"""Draw the docs site's stepper frames: the build step `make docs` runs first.

Each notebook page with a linked stepper has a recipe here that makes the same
runs the notebook makes (``SITE_STEPPERS``). For each, the frames go to
``OUT/static/stepper/<id>/<preset>/<step>-<stage>-{strip,gantt}.png`` (the site's
``_static/stepper/<id>/``) and the manifest, with the frames' sizes, to
``OUT/steppers.json`` ({page: manifest}), which the
site's Sphinx extension (``docs/_ext/minispec_site.py``) puts on the page. Frames
are drawn again only when minispec's code or shipped models changed (a digest is
kept beside them), so an unchanged tree costs nothing.

    python tools/stepper_frames.py --out build/docs-frames [--jobs 2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

# this clone's minispec, as docs/conf.py documents it, whichever one the venv installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import minispec  # noqa: E402
from minispec.config import DEFAULT_TARGET  # noqa: E402
from minispec.lab.viz.static_stepper import render_frames, stepper_manifest  # noqa: E402
from minispec.lab.viz.stepper import thread_runs  # noqa: E402
from minispec.lab.viz.text import char_decoder  # noqa: E402
from minispec.transformers_utils.tokenizer import load_tokenizer  # noqa: E402


def thread_stepper():
    """``01_the_thread``'s stepper: ``trace_stepper(thread_runs(), decode=cell, step=2)``."""
    return thread_runs(), char_decoder(load_tokenizer(DEFAULT_TARGET), visible_spaces=True), {"step": 2}


SITE_STEPPERS = {"notebooks/01_the_thread": thread_stepper}


def code_digest() -> str:
    """minispec's sources and shipped models: the frames drawn by other code are drawn again."""
    package = Path(minispec.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.read_bytes())
    for path in sorted((package / "checkpoints").rglob("*")):  # large: their names and sizes
        digest.update(f"{path.relative_to(package)}:{path.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def build(out: Path, jobs: int) -> dict:
    """Each page's manifest (with frame sizes), drawing the frames that are missing or stale."""
    site, code = {}, code_digest()
    for page, recipe in SITE_STEPPERS.items():
        stamp = out / "drawn" / f"{page.replace('/', '_')}.json"
        drawn = json.loads(stamp.read_text()) if stamp.exists() else {}
        folder = out / "static" / "stepper" / drawn.get("manifest", {}).get("id", "-")
        if drawn.get("code") == code and folder.is_dir():  # same code, same runs, same frames
            site[page] = drawn["manifest"]
            print(f"{page}: stepper frames up to date in {folder}")
            continue
        runs, decode, start = recipe()
        manifest = stepper_manifest(runs, decode, **start)
        folder = out / "static" / "stepper" / manifest["id"]
        shutil.rmtree(folder, ignore_errors=True)
        start_time = time.perf_counter()
        sized = render_frames(runs, decode, manifest, folder, jobs)
        took = time.perf_counter() - start_time
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps({"code": code, "manifest": sized, "seconds": round(took, 1)}, ensure_ascii=False))
        site[page] = sized
        print(f"{page}: stepper {manifest['id']}: {sized['files']} frames, {sized['bytes'] / 1e6:.1f} MB, "
              f"drawn in {took:.0f} s with {jobs} processes, in {folder}")
    for old in (out / "static" / "stepper").iterdir():  # frames of stops no page shows any more
        if old.name not in {m["id"] for m in site.values()}:
            shutil.rmtree(old)
    (out / "steppers.json").write_text(json.dumps(site, ensure_ascii=False))
    return site


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
