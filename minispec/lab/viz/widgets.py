"""Thin ipywidgets wrappers around the pure renderers, for JupyterLab."""

from __future__ import annotations

from minispec.instruments.trace import Trace
from minispec.lab.viz.plots import plot_stage_rows
from minispec.lab.viz.text import render_event


def trace_stepper(trace: Trace, decode=str):
    """A slider over the trace's events; shows each event's text and, for stage
    events, the rows of that stage's persistent batch."""
    import ipywidgets as widgets
    from IPython.display import display

    slider = widgets.IntSlider(value=0, min=0, max=len(trace.events) - 1, description="event",
                               continuous_update=False, layout=widgets.Layout(width="70%"))
    out = widgets.Output()

    def show(change=None):
        out.clear_output(wait=True)
        with out:
            print(render_event(trace, slider.value, decode))
            kind, step_id, stage_id = trace.events[slider.value]
            if kind == "stage":
                display(plot_stage_rows(trace.step(step_id), stage_id, decode))

    slider.observe(show, names="value")
    show()
    return widgets.VBox([slider, out])
