"""The walkthrough site (``make docs``): its pages, its links, and its stepper in Chromium.

The site is built once per run, incrementally, into ``build/docs/html`` by the
same ``tools/build_docs.py`` that ``make docs`` runs (so after ``make docs`` the
build here takes seconds; from nothing, about two minutes for the stepper's
frames). Sphinx runs with warnings as errors. Without Sphinx the tests skip, unless
``MINISPEC_REQUIRE_DOCS=1`` (``.ci/run``) makes that a failure; the browser tests
follow ``MINISPEC_REQUIRE_BROWSER`` as ``tests/test_browser.py`` does. They look at
the site as a reader does, at a phone's, a projector's and a desktop's size, in light
and dark mode; screenshots go to a folder printed at the start
(``MINISPEC_SCREENSHOTS`` to choose it).
"""

import importlib
import importlib.util
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
        assert (site / "_learner" / f"{name}.ipynb").exists(), f"{name}: its learner copy to download"
    guides = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    assert "workshop" in guides and "api" in guides and "index" in guides
    for doc in guides:  # the handout and the opening screen too, when they are there
        assert (site / "docs" / f"{doc}.html").exists(), doc
    assert "What to read next" in (site / "README.html").read_text(), "the README, the front door, a page"
    assert "The walkthrough as a website" in (site / "docs" / "notebooks_and_site.html").read_text(), \
        "the README's former sections, pages of the site"
    assert 'url=docs/index.html' in (site / "index.html").read_text(), "the site's address opens the front door"
    landing = (site / "docs" / "index.html").read_text()
    assert "<title>minispec" in landing and "Reading without a kernel" in landing
    nav = Page(site / "docs" / "index.html").links
    order = [n for n in NOTEBOOKS if n[0].isdigit()]
    assert [link for link in nav if link.startswith("../notebooks/") and link[13].isdigit()][:len(order)] == \
        [f"../notebooks/{n}.html" for n in order], "the notebooks in their order, in the body and the navigation"
    table = re.search(r"<table.*?</table>", landing, re.S).group(0)
    for name in NOTEBOOKS:
        assert f'href="../notebooks/{name}.html"' in table, f"{name}: a linked row of the landing's table"
    assert len(re.findall(r"<td[^>]*>\s*<p>\d+</p>\s*</td>|<td[^>]*>\d+</td>", table)) == len(NOTEBOOKS), \
        "each notebook's minutes"


def test_notebook_pages_fold_answers_and_say_how_to_run(site):
    import nbformat

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from site_notebook import DEEPER, FOLDED, REVEAL

    for name in NOTEBOOKS:
        page = (site / "notebooks" / f"{name}.html").read_text()
        assert "Run it yourself" in page and f'href="../_learner/{name}.ipynb"' in page, name
        nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
        tags = [set(c.metadata.get("tags", [])) for c in nb.cells if c.cell_type == "code"]
        code = [t & set(FOLDED) for t in tags]
        folded_output = sum(1 for t in code if t == {REVEAL})
        folded_cell = sum(1 for t, f in zip(tags, code) if f - {REVEAL} or (not f and DEEPER in t))  # Going deeper too
        deeper_md = [c for c in nb.cells if c.cell_type == "markdown" and DEEPER in c.metadata.get("tags", [])
                     and not set(c.metadata.get("tags", [])) & set(FOLDED)]
        # a fold per Going deeper cell with text beyond its headings (headings stay outside the folds)
        assert page.count('<details class="minispec-deeper">') >= sum(
            1 for c in deeper_md if re.sub(r"(?m)^#+\s.*$", "", c.source).strip()), f"{name}: Going deeper folded"
        assert page.count('<details class="admonition hide below-input">') == folded_output, name
        assert page.count('<details class="admonition hide above-input">') == folded_cell, name
        markdown = [c for c in nb.cells if c.cell_type == "markdown" and set(c.metadata.get("tags", [])) & set(FOLDED)]
        assert page.count('<details class="minispec-answer">') == sum(
            1 for c in markdown if not c.source.lstrip().startswith("<details")), name
        for alt in re.findall(r'<img alt="([^"]*)"', page):
            assert alt and not alt.endswith(".png"), f"{name}: a figure's alt text is {alt!r}"
        assert "minispec-built" in page and "commit <code>" in page, f"{name}: the footer names the build"
    assert "These exercises need a kernel" in (site / "notebooks" / "08_exercises.html").read_text()


def test_api_reference_has_every_module_and_its_source(site):
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from site_api import modules, packages

    api = (site / "docs" / "api.html").read_text()
    assert api.count("has a vLLM twin at the same path") == 1, "the layout rule, stated once"
    pages = {p: (site / "docs" / "api" / f"{p}.html").read_text() for p in packages()}
    for package in pages:
        assert f'href="api/{package}.html"' in api, package
    text = "".join(pages.values())
    for name in modules():
        try:
            importlib.import_module(name)
        except ImportError:  # a script for vLLM's environment: its docstring, under its name
            assert f"<span class=\"pre\">{name}</span>" in text and "Runs as a script in its own environment" in text, name
            continue
        assert f'id="module-{name}"' in text, name
    # each twin's docstring names its vLLM file, and the code is one click away, on the site
    assert "vllm/v1/worker/gpu_input_batch.py" in text and "vllm/v1/core/sched/scheduler.py" in text
    assert 'class="viewcode-link"' in pages["minispec.v1.worker"]
    assert (site / "_modules" / "minispec" / "v1" / "worker" / "gpu_input_batch.html").exists()


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


def open_stepper(page):
    """The stepper asks nothing (its predictions have their own guess cells and reveals), so it
    is not behind a fold: a reader steps it at once (issue 34: a fold with nothing to predict)."""
    stepper = page.locator(STEPPER).first
    assert page.locator("details.hide", has=stepper).count() == 0, "the stepper is behind a fold"
    stepper.locator(".ms-next").wait_for()
    return stepper


def wait_images(page) -> None:
    page.wait_for_function("""() => [...document.querySelectorAll('div.minispec-stepper img')]
                              .every(i => i.complete && i.naturalWidth > 0)""", timeout=30_000)


SIZES = {"phone": (390, 844), "projector": (1280, 720), "desktop": (1440, 900)}
# The widest a page may be, beyond the screen, before it pans sideways (a rounding pixel).
SLACK = 1


def browser_or_skip() -> None:
    if why := lab_tools.missing_requirements():
        if os.environ.get("MINISPEC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"MINISPEC_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def shots(request, tmp_path_factory) -> Path:
    folder = Path(os.environ.get("MINISPEC_SCREENSHOTS") or tmp_path_factory.mktemp("site-screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    say(request, f"docs site screenshots: {folder.resolve()}/")
    return folder


def set_mode(page, mode: str) -> None:
    """The theme's colour mode, as its switch stores it (read before the page draws)."""
    page.add_init_script(f"localStorage.setItem('mode', '{mode}'); localStorage.setItem('theme', '{mode}');")


def visible(page, selector: str):
    return [h for h in page.locator(selector).element_handles() if h.is_visible()]


@pytest.mark.browser
def test_site_in_chromium(served, request, shots):
    browser_or_skip()
    start = time.perf_counter()
    requests, failures = [], []
    with lab_tools.browser_page(1280, 720) as page:
        page.on("request", lambda r: requests.append(r.url))
        page.on("response", lambda r: r.status >= 400 and failures.append(f"{r.status} {r.url}"))
        page.on("requestfailed", lambda r: failures.append(f"failed {r.url}"))
        page.goto(served)
        page.wait_for_url("**/docs/index.html")
        page.wait_for_load_state("networkidle")
        assert "minispec" in page.title()
        assert page.locator("article a[href$='notebooks/00_map.html']").count() >= 2, "where to start, linked"

        page.goto(served + "notebooks/01_the_thread.html")
        stepper = open_stepper(page)
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
        stepper.locator("button.ms-toggle", has_text=re.compile("^stage 1$")).click()
        assert stepper_state(page)["label"].startswith("all · step 3 · stage 1 (last)")
        text = stepper.locator(".ms-text").text_content().splitlines()
        assert len(text) == len(set(text)), f"each line of the stop printed once: {text}"

        page.goto(served + "notebooks/04_pipeline_and_batch_queue.html")
        page.wait_for_load_state("networkidle")
        page.locator("img").nth(2).scroll_into_view_if_needed()
        page.screenshot(path=shots / "04_figures.png")
    outside = [url for url in requests if not url.startswith(served) and not url.startswith(("data:", "blob:"))]
    assert not outside, f"requests that left 127.0.0.1: {outside}"
    assert not failures, failures
    say(request, f"docs site browser test: {time.perf_counter() - start:.1f} s, {len(requests)} requests, "
                 f"{len(outside)} outside 127.0.0.1")


@pytest.mark.browser
@pytest.mark.parametrize("size", SIZES)
def test_sidebar_buttons_work_at_every_width(served, size):
    """pydata-sphinx-theme#2451: the visible ☰ and "On this page" buttons did nothing."""
    browser_or_skip()
    with lab_tools.browser_page(*SIZES[size]) as page:
        page.goto(served + "notebooks/02_speculative_decoding.html")
        page.wait_for_load_state("networkidle")
        menu = visible(page, "button.primary-toggle")
        assert len(menu) == 1, f"one visible ☰ at {size}"
        menu[0].click()
        if size == "phone":
            page.wait_for_function("document.getElementById('pst-primary-sidebar-modal').open")
            assert page.locator("#pst-primary-sidebar-modal a[href$='03_persistent_batch.html']").is_visible()
            page.keyboard.press("Escape")
            page.wait_for_function("!document.getElementById('pst-primary-sidebar-modal').open")
            toc = visible(page, "button.secondary-toggle")
            assert len(toc) == 1, "one visible 'On this page' button on a phone"
            toc[0].click()
            page.wait_for_function("document.getElementById('pst-secondary-sidebar-modal').open")
        else:
            sidebar = page.locator("#pst-primary-sidebar")
            page.wait_for_function("document.getElementById('pst-primary-sidebar').classList"
                                   ".contains('pst-sidebar-hidden')")
            sidebar.wait_for(state="hidden", timeout=10_000)  # ☰ collapses the sidebar on a wide screen
            menu[0].click()
            page.wait_for_function("!document.getElementById('pst-primary-sidebar').classList"
                                   ".contains('pst-sidebar-hidden')")


@pytest.mark.browser
def test_no_page_pans_sideways_on_a_phone_and_answers_are_folded(served, site):
    browser_or_skip()
    panning = []
    with lab_tools.browser_page(*SIZES["phone"]) as page:
        for path in pages(site):
            rel = path.relative_to(site).as_posix()
            if rel == "index.html" or rel.startswith("_modules/"):  # the redirect; the code pages scroll their code
                continue
            page.goto(served + rel)
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > SIZES["phone"][0] + SLACK:
                panning.append(f"{rel}: {width} px")
        assert not panning, "pages wider than a phone:\n" + "\n".join(panning)

        page.goto(served + "notebooks/02_speculative_decoding.html")
        fold = page.locator("div.cell.tag_reveal details.hide").first
        output = fold.locator(".cell_output")
        assert not output.is_visible(), "a reveal's output is closed until clicked"
        fold.locator("summary").click()
        assert output.is_visible()


@pytest.mark.browser
def test_wide_screens_use_their_width(served):
    browser_or_skip()
    with lab_tools.browser_page(*SIZES["desktop"]) as page:
        page.goto(served + "notebooks/01_the_thread.html")
        article = page.locator(".bd-article-container").bounding_box()
        assert article["width"] > 1000, f"the article column at 1440 px: {article['width']:.0f} px"
        blocks = page.evaluate("""[...document.querySelectorAll('.cell_output pre, .cell_input pre')]
                                  .filter(p => p.scrollWidth > p.clientWidth + 1).length""")
        assert blocks <= 3, f"{blocks} code or output blocks of 01 still scroll sideways at 1440 px"


@pytest.mark.browser
@pytest.mark.parametrize("size", ["projector", "projector-125", "projector-150", "phone"])
def test_stepper_projector_and_phone_views(served, shots, size):
    browser_or_skip()
    zoom = int(size.split("-")[1]) / 100 if "-" in size else 1.0  # browser zoom on the 1280 x 720 projector
    width, height = (round(d / zoom) for d in SIZES[size.split("-")[0]])
    with lab_tools.browser_page(width, height) as page:
        page.goto(served + "notebooks/01_the_thread.html")
        stepper = open_stepper(page)
        stepper.scroll_into_view_if_needed()
        wait_images(page)
        if size.startswith("projector"):
            stepper.locator(".ms-projector-button").click()
            wait_images(page)
            for part in (".ms-next", "img.ms-strip"):  # press next, read the strip: one screen
                box = stepper.locator(part).bounding_box()
                assert box and box["y"] >= 0 and box["y"] + box["height"] <= height + SLACK, \
                    f"{part} within the 1280 x 720 screen at {zoom:.0%}: {box}"
            content = stepper.evaluate("e => e.clientWidth - parseFloat(getComputedStyle(e).paddingLeft) * 2")
            strip = stepper.locator("img.ms-strip").bounding_box()
            assert strip["width"] >= 0.8 * content, f"the strip {strip['width']:.0f} of {content:.0f} px at {zoom:.0%}"
            page.screenshot(path=shots / f"01_stepper_{size}.png")
            page.keyboard.press("Escape")
            assert "ms-projecting" not in (stepper.get_attribute("class") or "")
        else:
            strip = stepper.locator("img.ms-strip").bounding_box()
            assert strip["width"] >= 600, f"the strip keeps a legible size on a phone: {strip['width']:.0f} px"
            assert page.evaluate("document.documentElement.scrollWidth") <= width + SLACK, "the page does not pan"
            page.screenshot(path=shots / "01_stepper_phone.png")


def contrast(page, selector: str) -> float:
    """WCAG contrast of the first ``selector``'s text against the first opaque background behind it."""
    return page.locator(selector).first.evaluate("""e => {
        const rgb = c => c.match(/[\\d.]+/g).map(Number);
        const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92
                                   : ((v + 0.055) / 1.055) ** 2.4; }).reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
        let bg = e, back = null;
        while (bg) { const c = rgb(getComputedStyle(bg).backgroundColor); if (c.length < 4 || c[3] > 0) { back = c; break; }
                     bg = bg.parentElement; }
        const [a, b] = [lum(rgb(getComputedStyle(e).color)), lum(back || [255, 255, 255])];
        return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    }""")


@pytest.mark.browser
@pytest.mark.parametrize("mode", ["light", "dark"])
def test_screens_in_light_and_dark(served, shots, mode):
    """The landing page, the stepper and 09's tables at each size, in each mode, with
    readable tables and a labelled header cell in each table column."""
    browser_or_skip()
    for size, (width, height) in SIZES.items():
        with lab_tools.browser_page(width, height) as page:
            set_mode(page, mode)
            page.goto(served + "docs/index.html")
            page.wait_for_load_state("networkidle")
            assert page.evaluate("document.documentElement.dataset.theme") == mode
            page.screenshot(path=shots / f"landing_{size}_{mode}.png")
            page.goto(served + "notebooks/01_the_thread.html")
            stepper = open_stepper(page)
            stepper.evaluate("e => e.scrollIntoView({block: 'start'})")
            wait_images(page)
            page.screenshot(path=shots / f"01_stepper_{size}_{mode}.png")
            page.goto(served + "notebooks/09_the_same_bug_again.html")
            table = page.locator(".cell_output table").first
            table.scroll_into_view_if_needed()
            page.screenshot(path=shots / f"09_table_{size}_{mode}.png")
            for part in (".cell_output table a", ".cell_output table td"):
                assert contrast(page, part) >= 4.5, f"{part} in {mode} mode: contrast {contrast(page, part):.2f}"
            assert page.evaluate("[...document.querySelectorAll('th')].filter(t => !t.textContent.trim()).length") == 0
            assert "commit" in page.locator(".minispec-built").text_content()
            # the icons come from the theme's web font, not from its Font Awesome script
            page.wait_for_function("document.fonts.check('900 16px \"Font Awesome 7 Free\"')")
            undrawn = page.evaluate("[...document.querySelectorAll('i[class*=\"fa-\"]')].filter(i => "
                                    "i.offsetParent && getComputedStyle(i, '::before').content === 'none')"
                                    ".map(i => i.className)")
            assert not undrawn, f"icons without a glyph: {undrawn}"
            nameless = page.evaluate("[...document.querySelectorAll('summary, button')].filter(c => c.offsetParent"
                                     " && !(c.getAttribute('aria-label') || c.textContent.trim() || c.title))"
                                     ".map(c => c.outerHTML.slice(0, 80))")
            assert not nameless, f"controls with no name: {nameless}"
            mismatched = page.evaluate("[...document.querySelectorAll('button[aria-label], summary[aria-label], "
                                       "a[aria-label]')].filter(c => c.offsetParent && c.textContent.trim()"
                                       " && !c.textContent.includes(c.getAttribute('aria-label')))"
                                       ".map(c => c.outerHTML.slice(0, 80))")
            assert not mismatched, f"labels that do not say what the control shows: {mismatched}"


# --- the reader's furniture (issue 34 §6): the classes, the source, copy buttons, print ------------

def _ext(name: str):
    """A site extension (``docs/_ext``); it imports Sphinx, which the docs extra brings: without it
    the test skips, or fails where ``MINISPEC_REQUIRE_DOCS=1`` (``.ci/run``), as the site does."""
    if importlib.util.find_spec("sphinx") is None:
        if os.environ.get("MINISPEC_REQUIRE_DOCS") == "1":
            pytest.fail("MINISPEC_REQUIRE_DOCS=1 but sphinx is not installed: pip install -e '.[docs]'")
        pytest.skip("sphinx is not installed: pip install -e '.[docs]'")
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    return importlib.import_module(name)


def test_the_api_page_links_the_engines_parts_and_every_class_a_notebook_imports(site):
    site_api = _ext("site_api")
    api = (site / "docs" / "api.html").read_text()
    classes = [site_api._object(p) for p in site_api.CORE] + site_api.notebook_classes()
    names = {c.__name__ for c in classes}
    assert {"LLM", "Scheduler", "EngineCore", "InputBatch", "KVCacheManager", "CachedRequestState"} <= names
    assert {"SamplingParams", "GPUModelRunner", "InvariantViolation", "EagleModelMixin"} <= names, "the notebooks' own"
    for cls in classes:
        full = f"{cls.__module__}.{cls.__qualname__}"
        package = next(p for p, members in site_api.packages().items() if cls.__module__ in members)
        link = re.search(rf'href="(api/{re.escape(package)}\.html#{re.escape(full)})"', api)
        assert link, f"{full}: linked from the API page"
        entry = (site / "docs" / "api" / f"{package}.html").read_text()
        assert f'id="{full}"' in entry, f"{full}: an entry on its package's page"
        assert site_api.first_sentence(cls).split()[0] in api, f"{full}: what it is, beside its name"


def test_a_class_without_a_docstring_stops_the_api_index():
    """autodoc leaves an undocumented class out of its page (how LLM and Scheduler went missing):
    the index refuses one, a dataclass's made-up signature included."""
    from dataclasses import dataclass

    site_api = _ext("site_api")

    class Bare:
        pass

    @dataclass
    class Fields:
        x: int = 0

    for planted in (Bare, Fields):
        with pytest.raises(ValueError, match="has no docstring"):
            site_api.first_sentence(planted)


def test_the_index_finds_classes_in_a_notebooks_imports(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    site_api = _ext("site_api")
    nb = new_notebook(cells=[new_code_cell("%matplotlib inline\nfrom minispec.v1.core.kv_cache_manager import "
                                           "KVCacheManager\nfrom minispec.lab.experiments import PROMPTS")])
    nbformat.write(nb, tmp_path / "01_x.ipynb")
    assert [c.__name__ for c in site_api.notebook_classes(tmp_path)] == ["KVCacheManager"]  # PROMPTS: no class


def _git_repo(path: Path, remote: str | None) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    if remote is not None:
        subprocess.run(["git", "-C", str(path), "remote", "add", "origin", remote], check=True)
    return path


@pytest.mark.parametrize("remote,shown", [
    (None, None),  # no remote: nothing invented
    ("/srv/git/minispec.git", None),  # a path on the building machine: nobody else can reach it
    ("https://user:secret@git.example.org/team/minispec.git", "https://git.example.org/team/minispec.git"),
    ("git@git.example.org:team/minispec.git", "git.example.org:team/minispec.git"),
])
def test_the_repository_address_is_origins_or_none(tmp_path, remote, shown):
    site_source = _ext("site_source")
    assert site_source.repository_address(_git_repo(tmp_path / "repo", remote)) == shown


def test_the_site_says_where_the_source_lives(site):
    import tarfile

    site_source = _ext("site_source")
    name = site_source.archive_name()
    archive = site / "_downloads" / name
    assert archive.exists(), "the built commit's source, downloadable from the site"
    with tarfile.open(archive) as tar:
        files = tar.getnames()
    folder = site_source.archive_folder()
    assert f"{folder}/pyproject.toml" in files and f"{folder}/minispec/v1/worker/gpu_input_batch.py" in files
    for page, href in [("docs/index.html", f"../_downloads/{name}"),
                       ("notebooks/01_the_thread.html", f"../_downloads/{name}"),
                       ("docs/api/minispec.v1.worker.html", f"../../_downloads/{name}")]:
        text = (site / page).read_text()
        assert f'<a href="{href}" download>{name}</a>' in text, page
        footer = re.search(r'<p class="minispec-source">(.*?)</p>', text).group(1)
        address = site_source.repository_address()
        assert ("repository:" in footer) == (address is not None), "an address only where git knows one"


def test_copy_buttons_are_the_maintained_extension():
    import tomllib

    docs_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert any(re.fullmatch(r"sphinx-copybutton==[\d.]+", pin) for pin in docs_extra)


@pytest.mark.browser
def test_code_blocks_have_copy_buttons(served):
    browser_or_skip()
    with lab_tools.browser_page(*SIZES["projector"]) as page:
        page.goto(served + "notebooks/08_exercises.html")
        page.wait_for_load_state("networkidle")
        blocks = page.locator("div.highlight pre").count()
        buttons = page.locator("div.highlight button.copybtn").count()
        assert blocks > 10 and buttons == blocks, (blocks, buttons)
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        block = page.locator("div.cell_input div.highlight").first
        block.hover()
        block.locator("button.copybtn").click()
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.strip() and copied.split()[0] in block.locator("pre").text_content()


# For each closed fold of the page's text (the sidebar's are not printed): is its content shown?
# checkVisibility, as a closed fold's content keeps its layout boxes but is not drawn.
FOLDED_CONTENT = """() => [...document.querySelectorAll('article details:not([open])')].map(d =>
    [...d.children].filter(c => c.tagName !== 'SUMMARY').some(c => c.checkVisibility()))"""
# A stylesheet that keeps folds shut in print: the check must then fail.
SHUT_IN_PRINT = ("@media print { details::details-content { content-visibility: hidden !important; "
                 "display: block !important } }")


@pytest.mark.browser
def test_the_print_view_opens_every_fold(served):
    """On screen a closed fold hides its content (the check can fail: it does there); printed,
    every fold's content is laid out, by the stylesheet, and by the script on beforeprint."""
    browser_or_skip()
    with lab_tools.browser_page(*SIZES["desktop"]) as page:
        for rel in ("notebooks/08_exercises.html", "notebooks/01_the_thread.html"):
            page.goto(served + rel)
            page.wait_for_load_state("networkidle")
            on_screen = page.evaluate(FOLDED_CONTENT)
            assert len(on_screen) > 3 and not any(on_screen), f"{rel}: closed folds hide their content on screen"
            page.emulate_media(media="print")
            assert all(page.evaluate(FOLDED_CONTENT)), f"{rel}: a fold's content is missing from the print view"
            page.emulate_media(media="screen")
            page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
            assert page.evaluate("document.querySelectorAll('article details:not([open])').length") == 0, rel
            page.evaluate("window.dispatchEvent(new Event('afterprint'))")
            assert page.evaluate("document.querySelectorAll('article details:not([open])').length") == \
                len(on_screen), f"{rel}: the folds closed again after printing"
        page.add_style_tag(content=SHUT_IN_PRINT)  # planted: the check catches folds that stay shut
        page.emulate_media(media="print")
        assert not any(page.evaluate(FOLDED_CONTENT))
