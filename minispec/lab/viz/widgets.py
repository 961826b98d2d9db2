"""Thin ipywidgets wrappers around the pure renderers, for JupyterLab.

``trace_stepper`` is the linked stepper: play / prev / next, a step slider, a
stage selector and a preset toggle drive one view of the pipeline Gantt (the
current (step, stage) outlined), the row strip of every stage (the selected one
marked ▶) and the scheduler's output. What to show comes from
``stepper.stepper_view``; the drawing from ``stepper_figures``. Figures are sent
as PNG images of a fixed size, so the page does not jump as the slider moves and
nothing depends on the notebook's matplotlib backend.

Clicks coalesce: the label and the scheduler's text follow every click at once,
while the figures (about half a second each) are drawn in one background thread
that always draws the latest stop asked for, so ten rapid *next* clicks cost two
drawings, not ten. ``projector=True`` is the compact mode for a projected screen.
The displayed stepper also carries a small ``text/html`` placeholder naming its
frames (``static_stepper.placeholder_html``), which the docs site replaces with a
stepper that needs no kernel; JupyterLab shows the live widget.
"""

from __future__ import annotations

import functools
import html
import threading

from minispec.instruments.invariants import check_trace
from minispec.instruments.trace import Trace
from minispec.lab.viz.static_stepper import placeholder_html, stepper_manifest
from minispec.lab.viz.stepper import Run, StepperView, move, nearest_stop, stepper_view, stops
from minispec.lab.viz.stepper_figures import StepperFigures

PLAY_MS = 2000  # play's pace, shared with the static stepper


def _image(size: tuple[int, int]):
    """An empty Image widget of ``size`` pixels (every figure it will show has that size)."""
    import ipywidgets as widgets

    return widgets.Image(format="png", layout=widgets.Layout(width=f"{size[0]}px", height=f"{size[1]}px"))


def _as_runs(trace_or_runs, timeline) -> dict[str, Run]:
    if isinstance(trace_or_runs, Trace):
        return {trace_or_runs.fixes: Run(trace_or_runs, timeline)}
    runs = {name: Run(*run) if isinstance(run, tuple) else Run(run) for name, run in dict(trace_or_runs).items()}
    if not runs:
        raise ValueError("trace_or_runs: expected a Trace or a non-empty {preset: (trace, timeline)} dict, got {}")
    return runs


@functools.cache
def _box_class():
    """A VBox whose display also offers ``text/html``, for renderers without a kernel."""
    import ipywidgets as widgets

    class StepperBox(widgets.VBox):
        placeholder = ""

        def _repr_mimebundle_(self, **kwargs):
            bundle = super()._repr_mimebundle_(**kwargs)
            if bundle is not None and self.placeholder:
                bundle["text/html"] = self.placeholder
            return bundle

    return StepperBox


class TraceStepper:
    """The stepper's widgets, the one ``show`` that updates them, and the drawing thread."""

    def __init__(self, runs: dict[str, Run], decode=str, preset: str | None = None, step: int = 0, stage: int = 0,
                 projector: bool = False):
        import ipywidgets as widgets

        self.runs, self.decode = runs, decode
        self.violations = {name: check_trace(run.trace) for name, run in runs.items()}
        self.figures = StepperFigures(runs, decode, projector)
        num_stages = max(run.trace.pipeline_parallel_size for run in runs.values())
        first = preset or next(iter(runs))
        if first not in runs:
            raise ValueError(f"preset={preset!r}: expected one of {list(runs)}")
        step, stage = nearest_stop(runs[first].trace, step, stage)
        self.preset = widgets.ToggleButtons(options=list(runs), value=first, description="preset")
        self.stage = widgets.ToggleButtons(options=[(f"stage {s}", s) for s in range(num_stages)], value=stage,
                                           description="stage")
        self.step = widgets.IntSlider(value=step, min=0, max=self._max_step(first), description="step",
                                      continuous_update=False, layout=widgets.Layout(width="420px"))
        self.play = widgets.Play(value=0, min=0, max=len(stops(runs[first].trace)) - 1, interval=PLAY_MS,
                                 description="play")
        self.prev = widgets.Button(description="◀ prev", layout=widgets.Layout(width="80px"))
        self.next = widgets.Button(description="next ▶", layout=widgets.Layout(width="80px"))
        self.label = widgets.HTML()
        # projector: larger type, three lines of it, so the whole stepper fits 1280×720
        self._text_style = "margin:0; white-space:pre-wrap;" + (" font-size:16px;" if projector else "")
        self.text = widgets.HTML(layout=widgets.Layout(height="72px" if projector else "110px", overflow="auto",
                                                       width="100%"))
        view = stepper_view(runs, first, step, stage, decode, self.violations[first])
        strip = self.figures.strip(view)
        self.strip = _image(self.figures.size(strip))
        gantt = self.figures.gantt(view)
        self.gantt = None if gantt is None else _image(self.figures.size(gantt))
        self._busy = False
        self._pngs: dict[tuple[str, int, int], tuple[bytes, bytes | None]] = {}
        self._lock = threading.Lock()
        self._latest: tuple[tuple[str, int, int], StepperView] | None = None
        self._drawing = False
        self._idle = threading.Event()
        self._idle.set()
        self.prev.on_click(lambda _: self.go(-1))
        self.next.on_click(lambda _: self.go(+1))
        self.play.observe(self._on_play, names="value")
        for control in (self.preset, self.stage, self.step):
            control.observe(lambda _: self.show(), names="value")
        views = [self.gantt] if self.gantt is not None else []
        self.widget = _box_class()([
            widgets.HBox([self.play, self.prev, self.next, self.step]),
            widgets.HBox([self.stage, self.preset]),
            self.label, *views, self.strip, self.text,
        ])
        self.widget.placeholder = placeholder_html(stepper_manifest(runs, decode, first, step, stage))
        self.show(wait=True)  # the first figures are there when the cell's output appears

    def _max_step(self, preset: str) -> int:
        return max(step for step, _ in stops(self.runs[preset].trace))

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

    def show(self, wait: bool = False) -> None:
        """Put the current stop on screen: text now, figures when drawn (``wait``: before returning)."""
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
        self.text.value = f"<pre style='{self._text_style}'>{html.escape(view.text)}</pre>"
        self.view = view
        self._ask((view.preset, view.step, view.stage), view)
        if wait:
            self.settle()

    def _ask(self, key: tuple[str, int, int], view: StepperView) -> None:
        """Show ``key``'s figures, drawing them in the background if they are new."""
        with self._lock:
            self._latest = key, view
            if self._drawing:
                return  # the thread picks up the latest stop when it finishes the one it draws
            if key in self._pngs:  # revisiting a stop (prev, replay) costs nothing
                self._put(key)
                return
            self._drawing = True
            self._idle.clear()
        threading.Thread(target=self._draw_latest, name="stepper-figures", daemon=True).start()

    def _draw_latest(self) -> None:
        try:
            while True:
                with self._lock:
                    key, view = self._latest
                    if key in self._pngs:  # drawn: show it and stop, in one step under the lock,
                        self._put(key)     # so a click meanwhile either is this key or starts a thread
                        self._done()
                        return
                pngs = self.figures.pngs(view)  # outside the lock: clicks go on meanwhile
                with self._lock:
                    self._pngs[key] = pngs
        except Exception as error:  # a thread's traceback would go to the kernel's log, unseen
            with self._lock:
                self._done()
            self.label.value += f" <b>— figures failed: {html.escape(repr(error))}</b>"
            raise

    def _done(self) -> None:
        self._drawing = False
        self._idle.set()

    def _put(self, key: tuple[str, int, int]) -> None:
        strip, gantt = self._pngs[key]
        self.strip.value = strip
        if self.gantt is not None:
            self.gantt.value = gantt

    def settle(self, timeout: float | None = 60) -> bool:
        """Wait until the figures show the latest stop asked for; False if ``timeout`` ran out."""
        return self._idle.wait(timeout)


def trace_stepper(trace_or_runs, decode=str, timeline=None, preset: str | None = None, step: int = 0,
                  stage: int = 0, projector: bool = False):
    """The linked stepper, as a widget to display. ``trace_or_runs`` is a ``Trace``
    (with its ``timeline``, if any) or ``{preset: (trace, timeline)}``, e.g.
    ``stepper.thread_runs()``. ``projector=True``: one stage at a time, larger type,
    no Gantt, to fit a 1280×720 projected screen."""
    return TraceStepper(_as_runs(trace_or_runs, timeline), decode, preset, step, stage, projector).widget
