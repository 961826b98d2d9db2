"""Thin ipywidgets wrappers around the pure renderers, for JupyterLab.

``trace_stepper`` is the linked stepper: play / prev / next, a step slider, a
stage selector and a preset toggle drive one view of the pipeline Gantt (the
current (step, stage) outlined), the row strip of every stage (the selected one
marked ▶) and the scheduler's output. What to show comes from
``stepper.stepper_view``; the drawing from ``plots`` and ``gantt``. Figures are
sent as PNG images of a fixed size, so the page does not jump as the slider
moves and nothing depends on the notebook's matplotlib backend.
"""

from __future__ import annotations

import html
from io import BytesIO

from matplotlib.figure import Figure

from minispec.instruments.invariants import check_trace
from minispec.instruments.trace import Trace
from minispec.lab.viz.gantt import plot_gantt
from minispec.lab.viz.plots import plot_step_rows
from minispec.lab.viz.stepper import Run, move, nearest_stop, stepper_view, stops
from minispec.lab.viz.strip import WINDOW

DPI = 100


def figure_png(fig: Figure, dpi: int = DPI) -> bytes:
    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def _image(fig: Figure):
    """An empty Image widget the size of ``fig`` (every figure it will show has that size)."""
    import ipywidgets as widgets

    w, h = fig.get_size_inches() * DPI
    return widgets.Image(format="png", layout=widgets.Layout(width=f"{w:.0f}px", height=f"{h:.0f}px"))


def _as_runs(trace_or_runs, timeline) -> dict[str, Run]:
    if isinstance(trace_or_runs, Trace):
        return {trace_or_runs.fixes: Run(trace_or_runs, timeline)}
    runs = {name: Run(*run) if isinstance(run, tuple) else Run(run) for name, run in dict(trace_or_runs).items()}
    if not runs:
        raise ValueError("trace_or_runs: expected a Trace or a non-empty {preset: (trace, timeline)} dict, got {}")
    return runs


class TraceStepper:
    """The stepper's widgets and the one ``show`` that updates them all."""

    def __init__(self, runs: dict[str, Run], decode=str, preset: str | None = None, step: int = 0, stage: int = 0):
        import ipywidgets as widgets

        self.runs, self.decode = runs, decode
        self.violations = {name: check_trace(run.trace) for name, run in runs.items()}
        num_stages = max(run.trace.pipeline_parallel_size for run in runs.values())
        self.max_rows = max(len(st.rows) for run in runs.values() for s in run.trace.steps for st in s.stages)
        self.ncols = WINDOW + 1 + max((len(d) for run in runs.values() for s in run.trace.steps
                                       for d in s.schedule.scheduled_spec_decode_tokens.values()), default=0)
        first = preset or next(iter(runs))
        if first not in runs:
            raise ValueError(f"preset={preset!r}: expected one of {list(runs)}")
        step, stage = nearest_stop(runs[first].trace, step, stage)
        self.preset = widgets.ToggleButtons(options=list(runs), value=first, description="preset")
        self.stage = widgets.ToggleButtons(options=[(f"stage {s}", s) for s in range(num_stages)], value=stage,
                                           description="stage")
        self.step = widgets.IntSlider(value=step, min=0, max=self._max_step(first), description="step",
                                      continuous_update=False, layout=widgets.Layout(width="420px"))
        self.play = widgets.Play(value=0, min=0, max=len(stops(runs[first].trace)) - 1, interval=2000,
                                 description="play")
        self.prev = widgets.Button(description="◀ prev", layout=widgets.Layout(width="80px"))
        self.next = widgets.Button(description="next ▶", layout=widgets.Layout(width="80px"))
        self.label = widgets.HTML()
        self.text = widgets.HTML(layout=widgets.Layout(height="110px", overflow="auto", width="100%"))
        view = stepper_view(runs, first, step, stage, decode, self.violations[first])
        has_gantt = all(run.timeline is not None for run in runs.values())
        self.gantt = _image(self._gantt_figure(view)) if has_gantt else None
        self.strip = _image(self._strip_figure(view))
        self._busy = False
        self._pngs: dict[tuple[str, int, int], tuple[bytes, bytes]] = {}
        self.prev.on_click(lambda _: self.go(-1))
        self.next.on_click(lambda _: self.go(+1))
        self.play.observe(self._on_play, names="value")
        for control in (self.preset, self.stage, self.step):
            control.observe(lambda _: self.show(), names="value")
        views = [self.gantt] if self.gantt is not None else []
        self.widget = widgets.VBox([
            widgets.HBox([self.play, self.prev, self.next, self.step]),
            widgets.HBox([self.stage, self.preset]),
            self.label, *views, self.strip, self.text,
        ])
        self.show()

    def _max_step(self, preset: str) -> int:
        return max(step for step, _ in stops(self.runs[preset].trace))

    def _strip_figure(self, view) -> Figure:
        step = self.runs[view.preset].trace.step(view.step)
        return plot_step_rows(step, self.decode, selected=view.stage, max_rows=self.max_rows, ncols=self.ncols)

    def _gantt_figure(self, view) -> Figure:
        return plot_gantt(self.runs[view.preset].timeline, title=view.preset, highlight=view.highlight)

    def go(self, delta: int) -> None:
        """Move ``delta`` stops (prev: -1, next: +1)."""
        step, stage = move(self.runs[self.preset.value].trace, self.step.value, self.stage.value, delta)
        self._set(step, stage)
        self.show()

    def _on_play(self, change) -> None:
        if not self._busy:
            self._set(*stops(self.runs[self.preset.value].trace)[change["new"]])
            self.show()

    def _set(self, step: int, stage: int) -> None:
        self._busy = True
        try:
            self.step.max = self._max_step(self.preset.value)
            self.step.value, self.stage.value = step, stage
        finally:
            self._busy = False

    def show(self) -> None:
        if self._busy:
            return
        preset = self.preset.value
        view = stepper_view(self.runs, preset, self.step.value, self.stage.value, self.decode,
                            self.violations[preset])
        self._busy = True
        try:
            self.step.max = self._max_step(preset)
            self.step.value, self.stage.value = view.step, view.stage
            self.play.max, self.play.value = view.count - 1, view.index
        finally:
            self._busy = False
        self.label.value = f"<b>{html.escape(view.label)}</b> &nbsp;— {html.escape(view.position)}"
        self.text.value = f"<pre style='margin:0; white-space:pre-wrap'>{html.escape(view.text)}</pre>"
        key = (view.preset, view.step, view.stage)
        if key not in self._pngs:  # revisiting a stop (prev, replay) costs nothing
            self._pngs[key] = (figure_png(self._strip_figure(view)),
                               figure_png(self._gantt_figure(view)) if self.gantt is not None else b"")
        self.strip.value = self._pngs[key][0]
        if self.gantt is not None:
            self.gantt.value = self._pngs[key][1]
        self.view = view


def trace_stepper(trace_or_runs, decode=str, timeline=None, preset: str | None = None, step: int = 0,
                  stage: int = 0):
    """The linked stepper, as a widget to display. ``trace_or_runs`` is a ``Trace``
    (with its ``timeline``, if any) or ``{preset: (trace, timeline)}``, e.g.
    ``stepper.thread_runs()``."""
    return TraceStepper(_as_runs(trace_or_runs, timeline), decode, preset, step, stage).widget
