"""Write docs/package_map.md's twin table (between its markers) from the modules' docstrings.

Each mirrored module's docstring names its vLLM twin, and the release when it is
not 0.9.2; ``minispec.lab.records.twin_map`` reads them. This writes the same table into
``docs/package_map.md``, so that page cannot disagree with the code; the map's boxes and
notebook 07 read the docstrings themselves. ``tests/test_vllm_map.py`` checks that
the page is current and that each twin exists in the release it names.

    python tools/twin_table.py          # rewrite the table in docs/package_map.md
    python tools/twin_table.py --check  # exit 1 if it is out of date
"""

from __future__ import annotations

import sys

from generated import ROOT, between, command

sys.path.insert(0, str(ROOT))

from minispec.lab.records.twin_map import Column, render_twins_markdown, vllm_twins  # noqa: E402

PAGE = ROOT / "docs" / "package_map.md"
BEGIN = "<!-- twin table: tools/twin_table.py writes it from the modules' docstrings; edit those -->"
END = "<!-- end of twin table -->"


def render(readme: str) -> str:
    """The page with its twin table as the docstrings make it."""
    return between(readme, BEGIN, END, render_twins_markdown(vllm_twins(), Column.SUMMARY) + "\n")


def main(argv=None) -> int:
    return command(PAGE, lambda: render(PAGE.read_text()), "tools/twin_table.py", __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
