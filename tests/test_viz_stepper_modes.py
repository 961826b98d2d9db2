"""The live stepper's coalesced clicks and projector mode, and the static stepper's data.

Reference for every figure: ``StepperFigures.pngs`` of the stop the label names,
drawn directly, so "the figures shown" means "the figures of that stop".
"""

import json
import threading

import pytest

from minispec.lab.viz.static_stepper import placeholder_html, site_html, stepper_manifest
from minispec.lab.viz.stepper import stepper_view, stops, thread_runs
from minispec.lab.viz.stepper_figures import PROJECTOR_DPI, StepperFigures
from minispec.lab.viz.widgets import TraceStepper, trace_stepper


@pytest.fixture(scope="module")
def runs():
    return thread_runs(max_tokens=8)


class SlowFigures(StepperFigures):
    """Counts the stops drawn, and holds each drawing until released, as a slow
    machine would, so clicks arrive while a stop is being drawn."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.drawn, self.release = [], threading.Event()
        self.release.set()

    def pngs(self, view):
        self.release.wait()
        self.drawn.append((view.preset, view.step, view.stage))
        return super().pngs(view)


def test_rapid_clicks_draw_only_the_latest_stop(runs, visible_decode):
    stepper = TraceStepper(runs, visible_decode)
    stepper.figures = slow = SlowFigures(runs, visible_decode)
    slow.release.clear()  # the first click's drawing hangs while nine more clicks come
    for _ in range(10):
        stepper.next.click()
    assert "step 5 · stage 0" in stepper.label.value, "the label follows every click at once"
    slow.release.set()
    assert stepper.settle()
    assert slow.drawn == [("vllm-0.9.2", 0, 1), ("vllm-0.9.2", 5, 0)], "the first click's stop, then the tenth's"
    assert stepper.strip.value == slow.pngs(stepper.view)[0] and stepper.gantt.value == slow.pngs(stepper.view)[1]
    stepper.play.value = 1  # back to the first click's stop: drawn before, nothing to wait for
    assert stepper.settle(0) and "step 0 · stage 1" in stepper.label.value and len(slow.drawn) == 4


def test_projector_mode_shows_one_stage_larger_and_fits_720p(runs, visible_decode):
    stepper = TraceStepper(runs, visible_decode, step=2, projector=True)
    assert stepper.gantt is None
    normal = StepperFigures(runs, visible_decode)
    view = stepper.view
    big, small = stepper.figures.strip(view), normal.strip(view)
    assert len(big.axes) == 1 and len(small.axes) == 2  # one stage's panel
    assert big.axes[0].get_title(loc="left").startswith("▶ step 2 · stage 0")
    w, h = stepper.figures.size(big)
    assert stepper.figures.dpi == PROJECTOR_DPI > 100
    # in JupyterLab (~120 px of its own): controls in two rows (~105 px), the label (~25 px),
    # the strip, the text (72 px); seen in a 1280×720 screenshot
    assert w <= 1240 and 105 + 25 + h + 72 <= 720 - 120, (w, h)
    stepper.stage.value = 1
    assert stepper.settle() and "step 2 · stage 1 (last)" in stepper.label.value
    assert stepper.strip.value == stepper.figures.pngs(stepper.view)[0]


def test_display_carries_the_placeholder_of_its_stops(runs, visible_decode):
    box = trace_stepper(runs, visible_decode, step=2)
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    manifest = stepper_manifest(runs, visible_decode, step=2)
    assert bundle["text/html"] == placeholder_html(manifest)
    assert f'data-stepper="{manifest["id"]}"' in bundle["text/html"]


def test_manifest_is_what_the_live_stepper_shows(runs, visible_decode):
    manifest = stepper_manifest(runs, visible_decode, step=2)
    assert manifest["start"] == {"preset": "vllm-0.9.2", "step": 2, "stage": 0} and manifest["stages"] == 2
    for preset, rows in manifest["presets"].items():
        assert [tuple(r[:2]) for r in rows] == stops(runs[preset].trace)
        for step, stage, label, position, text in rows[::7]:
            view = stepper_view(runs, preset, step, stage, visible_decode)
            assert (label, position, text) == (view.label, view.position, view.text)
    other = stepper_manifest(runs, visible_decode, step=5)
    assert other["id"] == manifest["id"], "the id names the stops, not where the stepper starts"
    assert stepper_manifest({"all": runs["all"]}, visible_decode)["id"] != manifest["id"]
    page = site_html(manifest, "_static/stepper/x/")
    data = page.split('class="minispec-stepper-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data.replace("<\\/", "</"))["frames"] == "_static/stepper/x/"
    assert "</script>" not in data, "no text in the data can end the script early"
