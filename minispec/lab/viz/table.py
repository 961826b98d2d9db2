"""A small table whose cells are written in a sliver of markdown (`code` spans and
[text](url) links), shown as HTML where HTML renders (JupyterLab, the docs site, whose
notebook outputs do not parse markdown tables) and as markdown elsewhere.

A pure renderer; no vLLM twin.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")


def cell_html(text: str) -> str:
    """One cell: escaped, then its code spans and links made HTML (code spans first, so a
    bracket inside one is never read as a link)."""
    parts = _CODE.split(text)  # even indices: prose, odd: code
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            escaped = html.escape(part, quote=False)
            out.append(_LINK.sub(lambda m: f'<a href="{m.group(2)}">{m.group(1)}</a>', escaped))
    return "".join(out)


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def __post_init__(self):
        bad = [i for i, row in enumerate(self.rows) if len(row) != len(self.header)]
        if bad:
            raise ValueError(f"Table: rows {bad} do not have the header's {len(self.header)} cells")

    def markdown(self) -> str:
        def line(cells):
            return "| " + " | ".join(c.replace("|", "/") for c in cells) + " |"

        return "\n".join([line(self.header), "|" + "---|" * len(self.header), *map(line, self.rows)])

    def html(self) -> str:
        # An empty header cell (the corner over the row names) is a plain cell: a header
        # with no text names nothing to a screen reader.
        head = "".join(f'<th style="text-align:left">{cell_html(c)}</th>' if c else "<td></td>" for c in self.header)
        body = "".join("<tr>" + "".join(f'<td style="text-align:left">{cell_html(c)}</td>' for c in row) + "</tr>"
                       for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_markdown_(self) -> str:
        return self.markdown()
