"""The linked stepper's two figures at a stop, one fixed size per stepper.

The live widget (``widgets.py``) and the site's static stepper
(``static_stepper.py``) both draw a stop with this class, so the site shows the
very frames JupyterLab shows. Every strip of a stepper has the same size (the
most rows and cells any stop needs), so the page does not jump as the step
moves. In projector mode the strip shows only the selected stage, at a larger
scale (``PROJECTOR_DPI``), and there is no Gantt and no legend (the laptops' stepper
has it), so the stepper fits a 1280×720 screen. No vLLM twin: vLLM has no pictures.
"""

from __future__ import annotations

from io import BytesIO

from matplotlib.figure import Figure

from minispec.lab.viz.gantt import plot_gantt
from minispec.lab.viz.plots import plot_step_rows
from minispec.lab.viz.stepper import Run, StepperView
from minispec.lab.viz.strip import WINDOW

DPI = 100
PROJECTOR_DPI = 130  # type 30% larger; one stage's strip is then 1136×386 px


def figure_png(fig: Figure, dpi: int = DPI) -> bytes:
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


class StepperFigures:
    """The strip (and Gantt) of any stop of ``runs``, drawn by minispec's renderers."""

    def __init__(self, runs: dict[str, Run], decode=str, projector: bool = False):
        self.runs, self.decode, self.projector = runs, decode, projector
        self.dpi = PROJECTOR_DPI if projector else DPI
        steps = [s for run in runs.values() for s in run.trace.steps]
        self.max_rows = max(len(st.rows) for s in steps for st in s.stages)
        self.ncols = WINDOW + 1 + max((len(d) for s in steps for d in s.schedule.scheduled_spec_decode_tokens.values()),
                                      default=0)
        self.has_gantt = not projector and all(run.timeline is not None for run in runs.values())

    def strip(self, view: StepperView) -> Figure:
        step = self.runs[view.preset].trace.step(view.step)
        stages = [view.stage] if self.projector else None
        return plot_step_rows(step, self.decode, stages, selected=view.stage, max_rows=self.max_rows, ncols=self.ncols,
                              legend=not self.projector)

    def gantt(self, view: StepperView) -> Figure | None:
        if not self.has_gantt:
            return None
        return plot_gantt(self.runs[view.preset].timeline, title=view.preset, highlight=view.highlight)

    def pngs(self, view: StepperView) -> tuple[bytes, bytes | None]:
        """The strip's PNG and the Gantt's (None without one)."""
        gantt = self.gantt(view)
        return figure_png(self.strip(view), self.dpi), None if gantt is None else figure_png(gantt, self.dpi)

    def size(self, fig: Figure) -> tuple[int, int]:
        """``fig``'s size in pixels, as its PNG will have it."""
        w, h = fig.get_size_inches() * self.dpi
        return round(w), round(h)
