"""Print the handout (docs/handout.md), or the answers slip (docs/answers_slip.md), to a one-page
A4 PDF, as the room gets it.

    python tools/handout.py [--slip] [--out handout.pdf]

The handout goes round at ``08_exercises`` §3 and holds no answer to fix 1 or fix 2; the slip,
with the answers, at the wrap-up (``minispec.lab.exercises.answers`` declares what gives them away).

The markdown is rendered with markdown-it (CommonMark and tables, what the docs site's MyST
parser builds on) under a plain print style, 10.5-pt type and 12-mm margins, and printed by
Debian's Chromium through playwright (``tools/lab_screenshots.py`` says how to install both).
It prints the page count; ``tests/test_workshop.py`` holds each to one page. No vLLM twin.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lab_screenshots  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HANDOUT = ROOT / "docs" / "handout.md"
SLIP = ROOT / "docs" / "answers_slip.md"
STYLE = ("@page { size: A4; margin: 12mm } body { font: 10.5pt/1.35 sans-serif }"
         " table { border-collapse: collapse } td, th { border: 1px solid gray; padding: 1px 4px }"
         " h1 { font-size: 15pt } h2 { font-size: 12pt; margin: .6em 0 .3em } hr { margin: .5em 0 }"
         " p, ul, ol { margin: .35em 0 } code { font-size: 9.5pt }")


def html(markdown: str) -> str:
    from markdown_it import MarkdownIt

    return f"<html><head><style>{STYLE}</style></head><body>{MarkdownIt('commonmark').enable('table').render(markdown)}</body></html>"


def pdf(markdown: str) -> bytes:
    """The A4 PDF Chromium prints of ``markdown``."""
    with lab_screenshots.browser_page() as page:
        page.set_content(html(markdown))
        return page.pdf(format="A4", prefer_css_page_size=True)


def pages(document: bytes) -> int:
    """Pages in a PDF Chromium wrote (one ``/Type /Page`` object each, besides the ``/Pages`` tree)."""
    return document.count(b"/Type /Page") - document.count(b"/Type /Pages")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slip", action="store_true", help="the answers slip, for the wrap-up")
    parser.add_argument("--out", type=Path, help="default: handout.pdf, or answers_slip.pdf with --slip")
    args = parser.parse_args(argv)
    source = SLIP if args.slip else HANDOUT
    args.out = args.out or Path(f"{source.stem}.pdf")
    if why := lab_screenshots.missing_requirements():
        sys.exit(why)
    document = pdf(source.read_text())
    args.out.write_bytes(document)
    print(f"{args.out}: {pages(document)} A4 page(s)")
    return 0 if pages(document) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
