"""The walkthrough site (``make docs``): its pages, its links, and its stepper in Chromium.

The site is built once per run, incrementally, into ``build/docs/html`` by the
same ``tools/build_docs.py`` that ``make docs`` runs (so after ``make docs`` the
build here takes seconds; from nothing, about two minutes for the stepper's
frames). Sphinx runs with warnings as errors. Without Sphinx or the widget script
the tests skip, unless ``MINISPEC_REQUIRE_DOCS=1`` (``.ci/run``) makes that a
failure; the browser test follows ``MINISPEC_REQUIRE_BROWSER`` as
``tests/test_browser.py`` does. Screenshots go to a folder printed at the start
(``MINISPEC_SCREENSHOTS`` to choose it).
"""

import importlib
import json
import os
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.docs  # builds the site: not in the fast tier

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import build_docs  # noqa: E402
import lab_screenshots as lab_tools  # noqa: E402

NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
STEPPER = "div.minispec-stepper"
CODE_BLOCK = re.compile(r'<div class="highlight[^"]*"><pre>(.*?)</pre>', re.S)


def say(request, line: str) -> None:
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\n{line}")


@pytest.fixture(scope="module")
def site(request) -> Path:
    why = None
    try:
        import myst_nb  # noqa: F401
        import sphinx_book_theme  # noqa: F401
    except ImportError as error:
        why = f"{error.name} is not installed: pip install -e '.[docs]'"
    if why is None and not build_docs.WIDGETS_JS.exists():
        why = f"{build_docs.WIDGETS_JS} is missing: `make docs` fetches it"
    if why:
        if os.environ.get("MINISPEC_REQUIRE_DOCS") == "1":
            pytest.fail(f"MINISPEC_REQUIRE_DOCS=1 but {why}")
        pytest.skip(why)
    start = time.perf_counter()
    out = build_docs.build()
    say(request, f"docs site built in {time.perf_counter() - start:.0f} s: {out}")
    return out


class Page(HTMLParser):
    """What a built page links to, loads, and names as ids."""

    LOADS = {("script", "src"), ("img", "src"), ("link", "href"), ("iframe", "src"), ("source", "src"),
             ("video", "src"), ("audio", "src"), ("embed", "src"), ("object", "data")}

    def __init__(self, path: Path):
        super().__init__()
        self.links, self.loads, self.ids = [], [], set()
        text = path.read_text()
        self.feed(text)
        # code blocks (notebook cells and fences), not code spans in the prose
        self.code = [re.sub(r"<[^>]+>", "", block) for block in CODE_BLOCK.findall(text)]

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and "href" in attrs:
            self.links.append(attrs["href"])
        for t, a in self.LOADS:
            if tag == t and attrs.get(a) and not (tag == "link" and attrs.get("rel") in ("canonical",)):
                self.loads.append(attrs[a])


def pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("*.html") if "_static" not in p.relative_to(site).parts)


def is_external(url: str) -> bool:
    return bool(urlsplit(url).scheme in ("http", "https") or url.startswith("//"))


def test_every_page_is_there(site):
    for name in NOTEBOOKS:
        assert (site / "notebooks" / f"{name}.html").exists(), name
    guides = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    assert "workshop" in guides and "api" in guides
    for doc in guides:  # the handout and the opening screen too, when they are there
        assert (site / "docs" / f"{doc}.html").exists(), doc
    landing = (site / "index.html").read_text()
    assert "<title>minispec" in landing and "The walkthrough as a website" in landing
    nav = Page(site / "index.html").links
    order = [n for n in NOTEBOOKS if n[0].isdigit()]
    assert [link for link in nav if link.startswith("notebooks/") and link[10].isdigit()][:len(order)] == \
        [f"notebooks/{n}.html" for n in order], "the notebooks in their order in the navigation"


def test_api_reference_has_every_module_and_its_twin(site):
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from minispec_site import modules

    api = (site / "docs" / "api.html").read_text()
    assert api.count("has a vLLM twin at the same path") == 1, "the layout rule, stated once"
    for name in modules():
        try:
            importlib.import_module(name)
        except ImportError:  # a script for vLLM's environment: its docstring, under its name
            assert f"<span class=\"pre\">{name}</span>" in api and "Runs as a script in its own environment" in api, name
            continue
        assert f'id="module-{name}"' in api, name
    # each twin's docstring names its vLLM file
    assert "vllm/v1/worker/gpu_input_batch.py" in api and "vllm/v1/core/sched/scheduler.py" in api


def test_no_nbval_markers_in_rendered_code(site):
    blocks = 0
    for path in pages(site):
        code = Page(path).code
        blocks += len(code)
        assert "NBVAL_" not in "".join(code), path
    assert blocks > 100, "the code blocks were found"
    assert "NBVAL_CHECK_OUTPUT" in (ROOT / "notebooks" / "01_the_thread.ipynb").read_text(), \
        "the notebooks still carry them for nbval"


def test_nothing_loads_from_another_host(site):
    for path in pages(site):
        external = [url for url in Page(path).loads if is_external(url)]
        assert not external, f"{path.relative_to(site)} loads {external}"
    for path in list(site.rglob("*.css")):
        assert not re.findall(r"url\(\s*['\"]?(?:https?:)?//", path.read_text(errors="replace")), path
        assert not re.findall(r"@import\s+(?:url\()?['\"]?(?:https?:)?//", path.read_text(errors="replace")), path


def test_every_internal_link_resolves(site):
    ids = {}
    broken = []
    for path in pages(site):
        page = Page(path)
        for href in page.links + page.loads:
            parts = urlsplit(href)
            if parts.scheme or href.startswith(("//", "mailto:", "data:", "javascript:")):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{path.relative_to(site)}: {href} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = Page(target).ids
                if unquote(parts.fragment) not in ids[target]:
                    broken.append(f"{path.relative_to(site)}: {href} (no id {parts.fragment!r} there)")
    assert not broken, "\n".join(broken)


def test_stepper_page_has_the_static_stepper(site):
    page = (site / "notebooks" / "01_the_thread.html").read_text()
    data = json.loads(re.search(r'<script type="application/json" class="minispec-stepper-data">(.*?)</script>',
                                page, re.S).group(1).replace("<\\/", "</"))
    assert set(data["presets"]) == {"vllm-0.9.2", "vllm-0.14", "all"}
    assert data["start"] == {"preset": "vllm-0.9.2", "step": 2, "stage": 0}
    frames = site / data["frames"]
    for preset, stops in data["presets"].items():
        for step, stage, *_ in stops:
            for figure in ("strip", "gantt"):
                assert (frames / preset / f"{step}-{stage}-{figure}.png").exists(), (preset, step, stage, figure)
    assert "application/vnd.jupyter.widget-state+json" not in page, "no frozen widget left on the page"


# --- the site in Chromium ---------------------------------------------------------------

@pytest.fixture(scope="module")
def served(site, request):
    """The site on a free 127.0.0.1 port, served by a process this test starts and stops."""
    port = lab_tools.free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                               "--directory", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/"
        for _ in range(100):
            try:
                import urllib.request

                urllib.request.urlopen(base, timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()  # by its own PID
        server.wait(timeout=10)


def stepper_state(page) -> dict:
    return page.locator(STEPPER).first.evaluate("""root => ({
        step: root.dataset.step, stage: root.dataset.stage, preset: root.dataset.preset,
        label: root.querySelector('.ms-label').textContent,
        images: [...root.querySelectorAll('img')].map(i => [i.getAttribute('src'), i.complete && i.naturalWidth]),
    })""")


def wait_images(page) -> None:
    page.wait_for_function("""() => [...document.querySelectorAll('div.minispec-stepper img')]
                              .every(i => i.complete && i.naturalWidth > 0)""", timeout=30_000)


@pytest.mark.browser
def test_site_in_chromium(served, request, tmp_path_factory):
    if why := lab_tools.missing_requirements():
        if os.environ.get("MINISPEC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MINISPEC_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    shots = Path(os.environ.get("MINISPEC_SCREENSHOTS") or tmp_path_factory.mktemp("site-screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    say(request, f"docs site screenshots: {shots.resolve()}/")
    start = time.perf_counter()
    requests, failures = [], []
    with lab_tools.browser_page(1280, 720) as page:
        page.on("request", lambda r: requests.append(r.url))
        page.on("response", lambda r: r.status >= 400 and failures.append(f"{r.status} {r.url}"))
        page.on("requestfailed", lambda r: failures.append(f"failed {r.url}"))
        page.goto(served)
        page.wait_for_load_state("networkidle")
        assert "minispec" in page.title()
        page.screenshot(path=shots / "landing.png")

        page.goto(served + "notebooks/01_the_thread.html")
        stepper = page.locator(STEPPER).first
        stepper.locator(".ms-next").wait_for()
        stepper.scroll_into_view_if_needed()
        wait_images(page)
        first = stepper_state(page)
        assert (first["preset"], first["step"], first["stage"]) == ("vllm-0.9.2", "2", "0")
        assert "vllm-0.9.2 · step 2 · stage 0 · batch_0 = {A, B}" in first["label"]
        for _ in range(2):
            stepper.locator(".ms-next").click()
        wait_images(page)
        moved = stepper_state(page)
        assert (moved["step"], moved["stage"]) == ("3", "0") and "step 3 · stage 0" in moved["label"]
        assert moved["images"] != first["images"], "next changes the figures"
        stepper.locator("button.ms-toggle", has_text=re.compile("^all$")).click()
        wait_images(page)
        switched = stepper_state(page)
        assert switched["preset"] == "all" and switched["label"].startswith("all · step 3 · stage 0")
        assert switched["images"] != moved["images"], "the preset changes the figures"
        # the whole stepper (about 800 px tall) as a reader with a taller screen sees it
        page.set_viewport_size({"width": 1280, "height": 1000})
        stepper.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.screenshot(path=shots / "01_stepper_next2_all.png")
        page.set_viewport_size({"width": 1280, "height": 720})
        stepper.locator("button.ms-toggle", has_text=re.compile("^stage 1$")).click()
        assert stepper_state(page)["label"].startswith("all · step 3 · stage 1 (last)")
        page.screenshot(path=shots / "01_viewport.png")

        page.goto(served + "notebooks/04_pipeline_and_batch_queue.html")
        page.wait_for_load_state("networkidle")
        page.locator("img").nth(2).scroll_into_view_if_needed()
        page.screenshot(path=shots / "04_figures.png")
    outside = [url for url in requests if not url.startswith(served) and not url.startswith(("data:", "blob:"))]
    assert not outside, f"requests that left 127.0.0.1: {outside}"
    assert not failures, failures
    say(request, f"docs site browser test: {time.perf_counter() - start:.1f} s, {len(requests)} requests, "
                 f"{len(outside)} outside 127.0.0.1")
