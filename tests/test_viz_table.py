"""The small markdown-celled table (minispec/lab/viz/table.py)."""

import pytest

from minispec.lab.viz.table import Table, cell_html


@pytest.mark.parametrize("text,html", [
    ("plain", "plain"),
    ("a `b<c>` d", "a <code>b&lt;c&gt;</code> d"),
    ("see [#1](https://x.org/1) & more", 'see <a href="https://x.org/1">#1</a> &amp; more'),
    ("`[n, 1]` (a shape)", "<code>[n, 1]</code> (a shape)"),  # brackets in code are not a link
    ("[not a link](ftp://x)", "[not a link](ftp://x)"),
])
def test_cell_html(text, html):
    assert cell_html(text) == html


def test_markdown_and_html_of_one_table():
    t = Table(("k", "v"), (("a|b", "`x`"),))
    assert t.markdown() == "| k | v |\n|---|---|\n| a/b | `x` |"
    assert t._repr_html_() == t.html() and t.html().startswith("<table><thead><tr><th")
    assert "<td style=\"text-align:left\"><code>x</code></td>" in t.html()


def test_a_row_of_the_wrong_width_is_refused():
    with pytest.raises(ValueError, match=r"rows \[1\] do not have the header's 2 cells"):
        Table(("k", "v"), (("a", "b"), ("c",)))


def test_an_empty_header_cell_is_no_header():
    """A corner cell over the row names: a <th> with no text names nothing to a screen reader."""
    html = Table(("", "V1"), (("drafts", "last stage"),)).html()
    assert html.startswith("<table><thead><tr><td></td><th") and "<th style=\"text-align:left\"></th>" not in html
