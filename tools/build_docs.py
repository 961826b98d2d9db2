"""Build the walkthrough site: what `make docs` runs.

Draws the stepper frames (``tools/stepper_frames.py``, skipped when nothing
changed), then runs Sphinx over the repository (configuration in ``docs/``)
into ``build/docs/html``, from the notebooks' stored outputs, and prints where
the site is, how long the build took and how big it is.

    python tools/build_docs.py [--clean] [--out build/docs/html]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
SITE = BUILD / "docs" / "html"


def folder_mb(path: Path, exclude: str | None = None) -> float:
    files = [p for p in path.rglob("*") if p.is_file() and not (exclude and exclude in p.parts)]
    return sum(p.stat().st_size for p in files) / 1e6


def build(out: Path = SITE, clean: bool = False, jobs: int = 2) -> Path:
    """The site in ``out``; raises if a page warned."""
    import warnings

    from sphinx.cmd.build import build_main
    from sphinx.deprecation import RemovedInSphinx11Warning

    sys.path.insert(0, str(ROOT / "tools"))
    import stepper_frames

    if clean:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(out.parent / "doctrees", ignore_errors=True)
    # Sphinx never deletes an output page: a renamed module's old source page would stay behind,
    # linking to ids that no longer exist. viewcode writes every source page on every build.
    shutil.rmtree(out / "_modules", ignore_errors=True)
    start = time.perf_counter()
    stepper_frames.build(BUILD / "docs-frames", jobs)
    frames = time.perf_counter() - start
    # sphinx-book-theme 1.4 and myst-parser 5.2 still read a transform's `.app`, which
    # Sphinx 9 announces it will remove in Sphinx 11: nothing to act on here.
    warnings.filterwarnings("ignore", category=RemovedInSphinx11Warning)
    status = build_main(["-b", "html", "-c", str(ROOT / "docs"), "-d", str(out.parent / "doctrees"), "-W",
                         "--keep-going", "-q", str(ROOT), str(out)])
    if status:
        raise RuntimeError(f"sphinx-build failed with status {status}: see the warnings above")
    took = time.perf_counter() - start
    print(f"site: {out / 'index.html'} ({took:.0f} s, of which {frames:.0f} s for the stepper's frames; "
          f"{folder_mb(out):.1f} MB, {folder_mb(out, 'stepper'):.1f} MB without the frames)")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SITE)
    parser.add_argument("--clean", action="store_true", help="rebuild every page")
    parser.add_argument("--jobs", type=int, default=2, help="processes drawing frames (default 2)")
    args = parser.parse_args(argv)
    build(args.out, args.clean, args.jobs)


if __name__ == "__main__":
    main()
