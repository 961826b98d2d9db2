"""The thread's notebook in a real JupyterLab in Chromium, as a learner runs it.

Runs every cell through the Run menu, then checks that no cell errored, that the
stepper widget rendered, and that its controls move the step and the figure.
Screenshots go to a folder printed at the start (``MINISPEC_SCREENSHOTS`` to
choose it). Skips without Chromium or playwright, unless
``MINISPEC_REQUIRE_BROWSER=1`` (set by ``.ci/run``) makes that a failure.
"""

import os
import re
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import lab_screenshots as lab_tools  # noqa: E402

NOTEBOOK = ROOT / "notebooks" / "01_the_thread.ipynb"
# The stepper's controls, found by what a learner reads on them (minispec.lab.viz.widgets).
STEPPER = ".widget-vbox:has(.widget-output)"
NEXT_LABELS = ("next", "▶")  # the first one the stepper has is pressed
NEXT_BUTTON = "button.widget-button:text-is('{}')"
PRESET_BUTTON = "button.widget-toggle-button:text-is('{}')"
PRESETS = ("vllm-0.9.2", "all")
STEP_TEXT = ".widget-output .jp-RenderedText"
FIGURE = ".widget-output img"
# The slider-only stepper (before the rebuilt one lands): its slider moves one event per key.
SLIDER_HANDLE = ".widget-slider .noUi-handle"
IDLE = ".jp-Notebook-ExecutionIndicator[data-status='idle']"

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def lab_page(request, tmp_path_factory):
    """The notebook opened and run in JupyterLab; yields (page, prompts, screenshot folder)."""
    if why := lab_tools.missing_requirements():
        if os.environ.get("MINISPEC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MINISPEC_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    shots = Path(os.environ.get("MINISPEC_SCREENSHOTS") or tmp_path_factory.mktemp("lab-screenshots"))
    say(request, f"browser test screenshots: {shots.resolve()}/")
    start = time.perf_counter()
    with lab_tools.running_lab() as lab, lab_tools.browser_page() as page:
        prompts = lab_tools.open_and_run(page, lab, NOTEBOOK)
        lab_tools.screenshots(page, shots, NOTEBOOK.stem)
        yield page, prompts, shots
    say(request, f"browser test: {time.perf_counter() - start:.1f} s with JupyterLab up")


def say(request, line: str) -> None:
    """Print past pytest's output capture, so the line shows in every run."""
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\n{line}")


def stepper_state(page):
    """(text, figure sources) the stepper shows now."""
    stepper = page.locator(STEPPER).first
    text = "\n".join(stepper.locator(STEP_TEXT).all_inner_texts())
    return text, [img.get_attribute("src") for img in stepper.locator(FIGURE).all()]


def wait_for_change(page, before, what: str):
    """The stepper's next settled view: changed, kernel idle, same on two looks (an
    Output widget receives its text and its figure as separate messages)."""
    last = before
    for _ in range(60):
        page.wait_for_timeout(250)
        now = stepper_state(page)
        if now != before and now == last and now[0] and page.locator(IDLE).count():
            return now
        last = now
    pytest.fail(f"the stepper still shows the same step after {what}:\n{before[0]}")


def next_button(page):
    stepper = page.locator(STEPPER).first
    return next((b for label in NEXT_LABELS if (b := stepper.locator(NEXT_BUTTON.format(label))).count()), None)


def press_next(page, before):
    if button := next_button(page):
        button.first.click()
    else:
        page.locator(STEPPER).first.locator(SLIDER_HANDLE).press("ArrowRight")
    return wait_for_change(page, before, "pressing next")


def test_every_cell_runs_without_error(lab_page):
    page, prompts, _ = lab_page
    assert prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), prompts
    assert lab_tools.error_outputs(page) == []


def test_stepper_renders(lab_page):
    page, _, _ = lab_page
    assert "Loading widget" not in page.locator(".jp-Notebook").inner_text()
    stepper = page.locator(STEPPER).first
    assert stepper.is_visible()
    text, _ = stepper_state(page)
    assert re.search(r"step \d+", text), text


def test_next_changes_the_step_and_the_figure(lab_page):
    page, _, shots = lab_page
    state = stepper_state(page)
    for _ in range(10):  # to the first view with a figure (the slider stepper opens on a schedule)
        if state[1]:
            break
        state = press_next(page, state)
    assert state[1], "no figure in the stepper after pressing next 10 times"
    page.locator(STEPPER).first.screenshot(path=str(shots / "stepper-before-next.png"))
    after = press_next(page, state)
    while not after[1]:
        after = press_next(page, after)
    page.locator(STEPPER).first.screenshot(path=str(shots / "stepper-after-next.png"))
    assert after[0] != state[0] and after[1] != state[1]


def test_preset_toggle_changes_the_figure(lab_page):
    page, _, shots = lab_page
    stepper = page.locator(STEPPER).first
    toggle = [stepper.locator(PRESET_BUTTON.format(p)) for p in PRESETS]
    if not toggle[0].count() and not next_button(page):
        pytest.skip("this notebook's stepper is the slider-only one, without a preset toggle")
    toggle[0].click()
    page.wait_for_timeout(500)
    before = stepper_state(page)
    toggle[1].click()
    after = wait_for_change(page, before, f"toggling the preset to {PRESETS[1]}")
    stepper.screenshot(path=str(shots / f"stepper-preset-{PRESETS[1]}.png"))
    assert after[0] != before[0] and after[1] != before[1]
