"""Open notebooks in a real JupyterLab in Chromium, run all cells, save screenshots.

    python tools/lab_screenshots.py notebooks/01_the_thread.ipynb [more.ipynb ...] [--out DIR]

Each notebook is opened as a learner opens it (Run menu > Run All Cells, in a
fresh kernel), and its page is saved screen by screen, as ``<name>-NN.png``
(the notebook scrolls inside JupyterLab, so a "full page" is a series of
screens). The JupyterLab server runs on 127.0.0.1 on a free port with a known
token and throw-away config, runtime and settings folders, and is stopped by
its own process group. ``tests/test_browser.py`` drives the same functions.

Needs Debian's Chromium (``apt-get install -y chromium``) and the ``playwright``
package; playwright's own browser download is never used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("MINISPEC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
INSTALL_HINT = ("install Chromium with `apt-get install -y chromium` (as root) and playwright with "
                "`pip install playwright` (no `playwright install`: it downloads a browser)")
# Settings for a reproducible lab: every cell attached to the page (so every output can
# be inspected), no news or update pop-ups over the notebook, and no autosave (a run
# must never rewrite the committed notebook).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}
LAB_CSS = ROOT / "tools" / "jupyterlab" / "custom" / "custom.css"
# A prompt of a cell that ran reads "[12]:"; queued or running cells read "[*]:".
PROMPTS_JS = "[...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(p => p.textContent.trim())"


def missing_requirements() -> str | None:
    """Why the browser cannot run here, or None."""
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}: {INSTALL_HINT}"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return f"the playwright package is not installed: {INSTALL_HINT}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A running JupyterLab server rooted at the repository."""

    def __init__(self, proc: subprocess.Popen, port: int, token: str):
        self.proc, self.port, self.token = proc, port, token

    def url(self, notebook: Path) -> str:
        rel = notebook.resolve().relative_to(ROOT).as_posix()
        # reset: a fresh workspace, so only this notebook is open and inspected
        return f"http://127.0.0.1:{self.port}/lab/tree/{rel}?reset&token={self.token}"


def _write_settings(folder: Path) -> None:
    for name, values in LAB_SETTINGS.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def _wait_until_up(lab: Lab, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    status = f"http://127.0.0.1:{lab.port}/api/status?token={lab.token}"
    while time.monotonic() < deadline:
        if lab.proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with {lab.proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(status, timeout=2):
                return
        time.sleep(0.3)
    raise TimeoutError(f"JupyterLab did not answer on port {lab.port} in {timeout} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen) -> None:
    """Stop the server and its kernels: its own process group, nothing else."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def running_lab():
    """Start JupyterLab (the kernel sees this checkout first on its path); stop it on exit."""
    home = Path(tempfile.mkdtemp(prefix="minispec-lab-"))
    _write_settings(home / "settings")
    (home / "config" / "custom").mkdir(parents=True)  # the stylesheet make lab ships (Makefile, LAB_CSS)
    shutil.copy(LAB_CSS, home / "config" / "custom" / "custom.css")
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "jupyter", "lab", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", "--ServerApp.open_browser=False",
           f"--ServerApp.root_dir={ROOT}", f"--LabApp.user_settings_dir={home / 'settings'}",
           f"--LabApp.workspaces_dir={home / 'workspaces'}", "--LabApp.custom_css=True"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    log = home / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(proc, port, token)
    try:
        _wait_until_up(lab, log)
        yield lab
    finally:
        _stop(proc)
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def browser_page(width: int = 1280, height: int = 900):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(120_000)  # a loaded 2-core machine starts kernels slowly
            yield page
        finally:
            browser.close()


def menu_command(page, menu: str, command: str, done_js: str, tries: int = 3) -> None:
    """Click a main-menu entry, then the item bound to a JupyterLab command id, until
    ``done_js`` holds (a loaded machine can drop a click made while the lab is busy)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
        page.locator(f'.lm-Menu-item[data-command="{command}"]').first.click()
        try:
            page.wait_for_function(done_js, timeout=30_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    raise TimeoutError(f"{menu} > {command} had no effect after {tries} tries")


def open_and_run(page, lab: Lab, notebook: Path, timeout_s: float = 300) -> list[str]:
    """Open the notebook, clear its stored outputs, run all cells, wait until every
    cell has run or the run stopped at an error; returns the input prompts."""
    cells = sum(c["cell_type"] == "code" for c in json.loads(notebook.read_text())["cells"])
    all_shown = f"{PROMPTS_JS}.length === {cells}"  # a prompt check on a half-loaded page proves nothing
    page.goto(lab.url(notebook))
    page.wait_for_function(all_shown)
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for()
    page.locator(".lm-TabBar-tab", has_text=notebook.name).first.click()  # the notebook is the current widget
    menu_command(page, "Edit", "editmenu:clear-all", f"{all_shown} && {PROMPTS_JS}.every(p => !/\\d/.test(p))")
    menu_command(page, "Run", "runmenu:run-all", f"{PROMPTS_JS}.some(p => /[\\d*]/.test(p))")
    # Done when nothing is queued or running and the kernel is idle (an error leaves later cells unrun).
    page.wait_for_function(
        f"{all_shown} && !{PROMPTS_JS}.some(p => p.includes('*')) && "
        "document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status === 'idle'",
        timeout=timeout_s * 1000)
    return page.evaluate(PROMPTS_JS)


def error_outputs(page) -> list[str]:
    """Text of every output that shows a Python traceback."""
    texts = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    return [t for t in texts if "Traceback" in t or re.search(r"^\w+(Error|Exception)\b", t, re.M)]


def screenshots(page, out: Path, name: str) -> list[Path]:
    """Screens of the notebook from top to bottom, as the learner scrolls it."""
    out.mkdir(parents=True, exist_ok=True)
    scroller = ".jp-NotebookPanel .jp-WindowedPanel-outer"
    if page.locator("#jp-left-stack").is_visible():
        page.keyboard.press("Control+b")  # hide the file browser: the notebook gets the width
    page.evaluate(f"document.querySelector('{scroller}').scrollTo(0, 0)")
    page.mouse.move(0, 0)
    paths = []
    while True:
        page.wait_for_timeout(300)
        path = out / f"{name}-{len(paths) + 1:02d}.png"
        page.screenshot(path=str(path))
        paths.append(path)
        at_end = page.evaluate(
            f"(() => {{ const s = document.querySelector('{scroller}'); const before = s.scrollTop;"
            " s.scrollBy(0, s.clientHeight * 0.9); return s.scrollTop === before; })()")
        if at_end or len(paths) >= 60:
            return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("lab-screenshots"), help="folder for the PNG files")
    args = parser.parse_args(argv)
    if why := missing_requirements():
        sys.exit(why)
    failed = 0
    with running_lab() as lab, browser_page() as page:
        for notebook in args.notebooks:
            start = time.perf_counter()
            prompts = open_and_run(page, lab, notebook)
            errors = error_outputs(page)
            not_run = sum(not re.search(r"\d", p) for p in prompts)
            shots = screenshots(page, args.out, notebook.stem)
            failed += bool(errors or not_run)
            print(f"{notebook}: {len(prompts)} code cells, {not_run} not run, {len(errors)} errors, "
                  f"{time.perf_counter() - start:.1f} s; {len(shots)} screens in {args.out.resolve()}/")
            for text in errors:
                print("  error:", text.strip().splitlines()[-1])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
