"""Draw the opening screen's figure (docs/opening.md): the forum thread's two batches
through two pipeline stages, as minispec's own Gantt renderer draws them.

    python tools/opening_figure.py [--out docs/img/opening-two-batches.png]

The figure shows which batch each stage runs at each step, and nothing of the
answer: no tokens, no draft slots, no acceptance. It highlights stage 0 at step 2,
where batch_0 = {A, B} comes back for its first decode while stage 0's persistent
batch still holds batch_1 = {C, D}. Re-run it when the scenario or the renderer changes.

No vLLM twin: this is workshop tooling.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "img" / "opening-two-batches.png"
TITLE = "batch_0 = {A, B} and batch_1 = {C, D} through 2 stages"


def draw(out: Path) -> Path:
    from minispec.lab.experiments.scenarios import forum_thread_llm
    from minispec.lab.experiments.schedule import run_recorded
    from minispec.lab.viz.gantt import plot_gantt

    llm = forum_thread_llm("vllm-0.9.2")
    run_recorded(llm)
    # 9 inches at 140 dpi: 1260 px, a projected 1280x720 screen's width, with the
    # renderer's type large enough to read from the back of the room.
    fig = plot_gantt(llm.timeline(), title=TITLE, highlight=(2, 0), max_step=5, width=9.0)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=140)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    print(draw(parser.parse_args(argv).out))


if __name__ == "__main__":
    main()
