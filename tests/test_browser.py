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
STEPPER = ".widget-vbox:has(.widget-toggle-buttons)"
NEXT_LABELS = ("next ▶", "next", "▶")  # the first one the stepper has is pressed
NEXT_BUTTON = "button.widget-button:text-is('{}')"
PRESET_BUTTON = "button.widget-toggle-button:text-is('{}')"
PRESETS = ("vllm-0.9.2", "all")
STEP_TEXT = ".widget-html"
FIGURE = "img"

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


# Image widgets show blob: URLs, new on every update; what counts is the PNG behind them.
IMAGE_DIGEST_JS = """async img => {
    const bytes = new Uint8Array(await (await fetch(img.src)).arrayBuffer());
    let h = 0;
    for (const b of bytes) h = (h * 31 + b) | 0;
    return `${bytes.length}:${h}`;
}"""


def find_stepper(page):
    """The stepper, once its widget view is on the page (views render after the run)."""
    stepper = page.locator(STEPPER).first
    stepper.wait_for(timeout=60_000)
    return stepper


def stepper_state(page):
    """(text, digests of the figures) the stepper shows now."""
    stepper = find_stepper(page)
    text = "\n".join(stepper.locator(STEP_TEXT).all_inner_texts())
    return text, [img.evaluate(IMAGE_DIGEST_JS) for img in stepper.locator(FIGURE).all()]


def wait_for_change(page, before, what: str):
    """The stepper's next settled view, once both its text and a figure differ from
    ``before`` (they arrive as separate widget updates, the figures last)."""
    last = before
    for _ in range(240):
        page.wait_for_timeout(250)
        now = stepper_state(page)
        if now[0] != before[0] and now[1] != before[1] and now == last:
            return now
        last = now
    unchanged = [name for name, a, b in (("text", last[0], before[0]), ("figures", last[1], before[1])) if a == b]
    pytest.fail(f"after {what} the stepper's {' and '.join(unchanged)} did not change in 60 s:\n{before[0]}")


def press_next(page, before):
    stepper = find_stepper(page)
    button = next(b for label in NEXT_LABELS if (b := stepper.locator(NEXT_BUTTON.format(label))).count())
    button.first.click()
    return wait_for_change(page, before, "pressing next")


def test_every_cell_runs_without_error(lab_page):
    page, prompts, _ = lab_page
    assert prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts), prompts
    assert lab_tools.error_outputs(page) == []


def test_stepper_renders(lab_page):
    page, _, _ = lab_page
    stepper = find_stepper(page)
    assert "Loading widget" not in page.locator(".jp-Notebook").inner_text()
    assert stepper.is_visible()
    text, _ = stepper_state(page)
    assert re.search(r"step \d+", text), text


def test_next_changes_the_step_and_the_figure(lab_page):
    page, _, shots = lab_page
    before = stepper_state(page)
    assert before[1], "the stepper shows no figure"
    find_stepper(page).screenshot(path=str(shots / "stepper-before-next.png"))
    after = press_next(page, before)
    find_stepper(page).screenshot(path=str(shots / "stepper-after-next.png"))
    assert after[0] != before[0] and after[1] != before[1]


def test_preset_toggle_changes_the_figure(lab_page):
    page, _, shots = lab_page
    stepper = find_stepper(page)
    toggle = [stepper.locator(PRESET_BUTTON.format(p)) for p in PRESETS]
    if not toggle[1].count():
        offered = stepper.locator(".widget-toggle-button").all_inner_texts()
        pytest.skip(f"the notebook's stepper offers no preset {PRESETS[1]!r} (buttons: {offered}); "
                    "give trace_stepper every preset's run to test the toggle")
    toggle[0].click()
    page.wait_for_timeout(500)
    before = stepper_state(page)
    toggle[1].click()
    after = wait_for_change(page, before, f"toggling the preset to {PRESETS[1]}")
    stepper.screenshot(path=str(shots / f"stepper-preset-{PRESETS[1]}.png"))
    assert after[0] != before[0] and after[1] != before[1]
