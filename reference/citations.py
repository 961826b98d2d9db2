"""Citations of vLLM release source, found in the repository's text and checked against the release.

A citation names a release, a file and lines, and may name a symbol or quote the code:

    vLLM 0.30.0 ``vllm/v1/worker/gpu/pp_utils.py`` 144-154
    (`vllm/v1/worker/gpu_model_runner.py`, `_update_states`, lines 480–488)
    0.9.2 ``gpu_model_runner.py`` lines 1515-1532, 0.14.0 lines 3616-3626
    (vLLM 0.30.0, `model_runner.py` 2022–2023: "Optimistically update num_computed_tokens ...")
    | 0.9.2 | `vllm/v1/worker/gpu_input_batch.py` | `add_request` (266; the copy at 282–290) |

The canonical form is the first: release, path from ``vllm/``, lines. The parser also reads
the others: a release written before the file in the same paragraph (or, failing that,
earlier in the same block: notebook cell, docstring paragraph run, README section) applies
to it, and one written among the line ranges applies to the ranges after it; a file named
by its base name is the path named earlier in the block with that name, else the one file
of the release with that name; a backticked name between the file and the lines, or a
lone name in brackets after a range, is the symbol; a quotation right after the lines is
the quote. In a markdown table row with a release cell and a file cell, every bracketed
list of line numbers in the row cites that file, with the backticked name before it.

``find_citations`` parses text into ``Citation``s and ``Unparsed`` mentions (a "line N"
it could not attach to a release and a file); ``check`` says whether a citation holds in a
release's sources: the file exists, the lines exist, the symbol is in the lines or encloses
them, the quote is in them. ``tools/cite_check.py`` runs both over the repository
(``make cite-check``).

vLLM twin: none (minispec's own tooling).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

RELEASE = r"(?<![\w.])(?:vLLM\s+)?v?(0\.\d{1,2}\.\d{1,2})(?:'s)?(?![\w]|\.\d)"
RELEASE_RE = re.compile(RELEASE)
# a path under vllm/ (written with or without "vllm/") or a bare file name, not one of minispec's own
FILE_RE = re.compile(r"(?<![\w/.-])((?:[a-z_][\w]*/)*[a-z_][\w]*\.py)(?![\w/])")
OWN_ROOTS = ("minispec/", "tests/", "tools/", "benchmarks/", "docs/", "notebooks/", "seed/", "src/")
ITEM_RE = re.compile(rf"(?:(?P<release>{RELEASE})\s*,?\s*)?(?:lines?\s+)?(?P<start>(?<![\w.])\d{{1,5}})"
                     rf"(?:\s*[-–]\s*(?P<end>\d{{1,5}}))?(?![\w.]*\d)")
# between the file and its first range: punctuation, backticked names, a release, "lines"
GAP_RE = re.compile(rf"(?:[\s,:(`#]|``?[\w.()]+``?|{RELEASE})*?(?:\blines?\s+)?(?=\d)")
SEPARATOR_RE = re.compile(rf"\s*(?:\([^()]*\))?\s*(?:,|;|\band\b|,\s*and\b)\s*(?=(?:{RELEASE}\s*,?\s*)?(?:lines?\s+)?\d)")
NOTE_RE = re.compile(r"\s*\(\s*([A-Za-z_][\w.]*)\s*\)")
QUOTE_RE = re.compile(r"\s*(?:\)|,)?\s*[:(]?\s*\*?[\"“]([^\"”]{8,}?)[\"”]")
SYMBOL_RE = re.compile(r"``?([A-Za-z_][\w.]*)(?:\(\))?``?")
LINE_WORD_RE = re.compile(r"\blines?\s+\d")
TABLE_NUMBERS_RE = re.compile(r"\(((?:lines?\s+)?\d{1,5}(?:\s*[-–]\s*\d{1,5})?(?:\s*(?:,|and)\s*\d{1,5}"
                              r"(?:\s*[-–]\s*\d{1,5})?)*)(?=[);])")


@dataclass(frozen=True)
class Citation:
    where: str  # "README.md:344", "notebooks/09_x.ipynb cell 20"
    release: str
    path: str  # "vllm/v1/worker/gpu/pp_utils.py"
    ranges: tuple[tuple[int, int], ...]
    symbol: str | None = None
    quote: str | None = None
    code: tuple[str, ...] = ()  # the lines of a ```python block the citation introduces

    @property
    def label(self) -> str:
        lines = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in self.ranges)
        extra = f" `{self.symbol}`" if self.symbol else ""
        return f"vLLM {self.release} {self.path} {lines}{extra}"


@dataclass(frozen=True)
class Unparsed:
    where: str
    text: str  # the words around it
    why: str


class Verdict(Enum):
    OK = "ok"
    NO_FILE = "the file is not in the release"
    NO_LINES = "the release's file is shorter than the lines cited"
    NO_SYMBOL = "the symbol is neither in the lines nor around them"
    NO_QUOTE = "the quote is not in the lines"
    NO_CODE = "a line of the code shown is not in the lines"


@dataclass(frozen=True)
class Block:
    """A piece of text a release or a file named earlier carries over within (a cell, a section)."""

    where: str
    text: str
    first_line: int | None = None  # line number of text's first line in its file, if it has one


Files = Callable[[str], frozenset[str] | None]  # release -> its file paths, or None if unavailable


def _where(block: Block, offset: int) -> str:
    if block.first_line is None:
        return block.where
    return f"{block.where}:{block.first_line + block.text.count(chr(10), 0, offset)}"


def _paragraph_start(text: str, offset: int) -> int:
    cut = text.rfind("\n\n", 0, offset)
    return 0 if cut < 0 else cut + 2


def _release_before(text: str, offset: int, start: int) -> str | None:
    found = [m.group(1) for m in RELEASE_RE.finditer(text, start, offset)]
    return found[-1] if found else None


def _resolve_path(name: str, text: str, offset: int, files: frozenset[str]) -> str | None:
    """``name`` as a path of the release: itself, under ``vllm/``, the path named earlier
    in the block with that base name, or the release's one file with that base name."""
    for candidate in (name, f"vllm/{name}"):
        if candidate in files:
            return candidate
    base = name.rsplit("/", 1)[-1]
    named = [m.group(1) for m in FILE_RE.finditer(text, 0, offset)]
    earlier = [p for p in named if p.endswith("/" + base)]
    earlier_vllm = [p for p in named if p.startswith("vllm/")]
    for path in reversed(earlier):
        for candidate in (path, f"vllm/{path}"):
            if candidate in files and candidate.endswith("/" + name):
                return candidate
    matches = sorted(f for f in files if f.endswith("/" + name))
    if len(matches) > 1 and earlier_vllm:
        # several files share the name: the one nearest the path named last before it
        near = earlier_vllm[-1].rsplit("/", 1)[0]
        matches = [f for f in matches if f.rsplit("/", 1)[0] == near] or matches
    return matches[0] if len(matches) == 1 else None


def _ranges(text: str, pos: int, release: str) -> tuple[list[tuple[str, int, int, str | None]], int]:
    """The (release, start, end, name) items from ``pos`` on; a release among them applies
    onwards, and a lone name in brackets after a range ("163-178 (broadcast_drafts)") is its symbol."""
    items = []
    while True:
        m = ITEM_RE.match(text, pos)
        if not m:
            break
        release = m.group(2) if m.group("release") else release
        start = int(m.group("start"))
        note = NOTE_RE.match(text, m.end())
        items.append((release, start, int(m.group("end") or start), note.group(1) if note else None))
        pos = m.end()
        sep = SEPARATOR_RE.match(text, pos)
        if not sep:
            break
        pos = sep.end()
    return items, pos


def _symbol_and_quote(text: str, gap: str, end: int, para_end: int) -> tuple[str | None, str | None]:
    symbols = [s for s in SYMBOL_RE.findall(gap) if not RELEASE_RE.fullmatch(s) and not s.endswith(".py")]
    symbol = symbols[-1] if symbols else None
    quote = QUOTE_RE.match(text, end, para_end)
    return symbol, quote.group(1) if quote else None


CODE_RE = re.compile(r"[^\n]*?:\s*\n\s*\n?```python\n(.*?)\n```", re.S)


def _code_after(text: str, end: int) -> tuple[str, ...]:
    """The lines of a ```python block that follows the citation's sentence ("...lines 480-488:"),
    without elisions ("..."); empty if none follows."""
    m = CODE_RE.match(text, end)
    if not m or "\n\n" in text[end: m.start(1) - 12]:
        return ()
    return tuple(line.strip() for line in m.group(1).split("\n")
                 if line.strip() and "..." not in line and "…" not in line)


def _cite(block, offset, release, path, items, symbol, quote, end=None):
    """One citation per release, and one more for each range that names its own symbol."""
    grouped: dict[tuple[str, str | None], list[tuple[int, int]]] = {}
    for item_release, start, stop, note in items:
        grouped.setdefault((item_release, note), []).append((start, stop))
    code = _code_after(block.text, end) if end is not None and len(grouped) == 1 else ()
    return [Citation(_where(block, offset), r, path, tuple(rs), note or symbol, quote, code)
            for (r, note), rs in grouped.items()]


def _named_just_before(text: str) -> tuple[str | None, str | None]:
    """A backticked name right before a bracket is a symbol; backticked code there, a quote."""
    m = re.search(r"`([^`]+)`\s*$", text)
    if not m or m.group(1).endswith(".py"):
        return None, None
    code = m.group(1).removesuffix("()")
    return (code, None) if re.fullmatch(r"[A-Za-z_][\w.]*", code) else (None, code)


def _table_row_citations(block: Block, files: Files) -> tuple[list[Citation], list[tuple[int, int]]]:
    citations, spans, offset = [], [], 0
    for row in block.text.split("\n"):
        cells = row.split("|")
        releases = [c.strip() for c in cells if RELEASE_RE.fullmatch(c.strip().strip("`"))]
        paths = [m.group(1) for c in cells for m in [FILE_RE.search(c)] if m and m.group(1).startswith("vllm/")]
        if row.lstrip().startswith("|") and len(releases) == 1 and len(paths) == 1:
            release = RELEASE_RE.fullmatch(releases[0].strip("`")).group(1)
            known = files(release)
            if known is not None and paths[0] in known:
                for m in TABLE_NUMBERS_RE.finditer(row):
                    items, _ = _ranges(row, m.start(1), release)
                    symbol, quote = _named_just_before(row[: m.start()])
                    citations += _cite(block, offset + m.start(), release, paths[0], items, symbol, quote)
                    spans.append((offset + m.start(), offset + m.end()))
        offset += len(row) + 1
    return citations, spans


def find_citations(block: Block, files: Files) -> tuple[list[Citation], list[Unparsed]]:
    """Every citation in ``block``, and every "line N" that could not be read as one."""
    text = block.text
    citations, consumed = _table_row_citations(block, files)
    unparsed: list[Unparsed] = []
    anchors: list[tuple[int, str, str]] = []  # (offset, release, path) of each file cited, in order
    for m in FILE_RE.finditer(text):
        name = m.group(1)
        if name.startswith(OWN_ROOTS) or any(a <= m.start() < b for a, b in consumed):
            continue
        para_start = _paragraph_start(text, m.start())
        para_end = text.find("\n\n", m.end())
        para_end = len(text) if para_end < 0 else para_end
        gap = GAP_RE.match(text, m.end(), para_end)
        release = (_release_before(text, gap.end() if gap else m.end(), m.end())
                   or _release_before(text, m.start(), para_start) or _release_before(text, m.start(), 0))
        items, end = _ranges(text, gap.end(), release or "") if gap else ([], m.end())
        if not items:
            # a file named without lines: "lines N" further on may mean it
            known = files(release) if release and name.startswith("vllm/") else None
            if known is not None and name in known:
                anchors.append((m.start(), release, name))
            continue
        consumed.append((m.start(), end))
        context = text[m.start():end].replace("\n", " ")
        if release is None:
            unparsed.append(Unparsed(_where(block, m.start()), context, "no release named before it"))
            continue
        paths = {r: _resolve_path(name, text, m.start(), known) for r in {i[0] for i in items}
                 if (known := files(r)) is not None}
        missing = sorted({i[0] for i in items} - set(paths))
        if missing:
            unparsed.append(Unparsed(_where(block, m.start()), context, f"vLLM {', '.join(missing)} not available"))
            continue
        if any(p is None for p in paths.values()):
            unparsed.append(Unparsed(_where(block, m.start()), context, f"{name} names no one file of the release"))
            continue
        symbol, quote = _symbol_and_quote(text, gap.group(0), end, para_end)
        anchors += [(m.start(), r, paths[r]) for r in sorted({i[0] for i in items})]
        for r in {i[0] for i in items}:
            citations += _cite(block, m.start(), r, paths[r], [i for i in items if i[0] == r], symbol, quote, end)
    for m in LINE_WORD_RE.finditer(text):
        if any(a <= m.start() < b for a, b in consumed):
            continue
        found = _continued(block, m.start(), anchors, files)
        citations += found
        if not found:
            around = text[max(0, m.start() - 60): m.end() + 20].replace("\n", " ")
            unparsed.append(Unparsed(_where(block, m.start()), around, "a line number with no file before it"))
    return citations, unparsed


def _continued(block: Block, offset: int, anchors: list[tuple[int, str, str]], files: Files) -> list[Citation]:
    """"lines N" with no file of its own: the file cited last before it in the block, in the
    release named since (else that citation's)."""
    before = [a for a in anchors if a[0] < offset]
    if not before:
        return []
    at, release, path = before[-1]
    text = block.text
    release = _release_before(text, offset, at) or release
    known = files(release)
    if known is None or path not in known:
        return []
    para_end = text.find("\n\n", offset)
    para_end = len(text) if para_end < 0 else para_end
    items, end = _ranges(text, offset, release)
    preceding = re.search(r"``?([A-Za-z_][\w.]*)(?:\(\))?``?[\s,(]*$", text[max(0, offset - 60): offset])
    symbol = preceding.group(1) if preceding and not preceding.group(1).endswith(".py") else None
    quote = QUOTE_RE.match(text, end, para_end)
    return _cite(block, offset, release, path, items, symbol, quote.group(1) if quote else None, end)


def _normalise(text: str) -> str:
    text = re.sub(r"(?m)^\s*#\s?", " ", text)
    # source strings split across lines ("... with " "pipeline ...") read as one
    return " ".join(re.sub(r"[`\"']", "", text).split()).lower()


def _quote_found(quote: str, cited: str) -> bool:
    haystack, at = _normalise(cited), 0
    for piece in re.split(r"\.\.\.|…|\[…\]|\[\.\.\.\]", quote):
        piece = _normalise(piece).strip(" .,")
        if not piece:
            continue
        at = haystack.find(piece, at)
        if at < 0:
            return False
    return True


def _in_order(shown: tuple[str, ...], lines: list[str]) -> bool:
    """Each line shown is a line of ``lines``, in the same order (elided lines skipped)."""
    rest = iter(" ".join(line.split()) for line in lines)
    return all(any(line == " ".join(want.split()) for line in rest) for want in shown)


def _enclosing_names(lines: list[str], start: int) -> list[str]:
    """The names of the defs and classes around line ``start`` (1-based), innermost first."""
    body = next((line for line in lines[start - 1:] if line.strip()), "")
    indent = len(body) - len(body.lstrip())
    names = []
    for line in reversed(lines[: start - 1] if not body.lstrip().startswith(("def ", "class ", "async def "))
                         else lines[: start]):
        stripped = line.lstrip()
        level = len(line) - len(stripped)
        m = re.match(r"(?:async\s+)?(?:def|class)\s+(\w+)", stripped)
        if m and (level < indent or not names and stripped is body.lstrip()):
            names.append(m.group(1))
            indent = level
        if indent == 0:
            break
    return names


def check(citation: Citation, root: Path) -> Verdict:
    """Whether ``citation`` holds in the release whose ``vllm/`` package is under ``root``."""
    source = root / citation.path
    if not source.is_file():
        return Verdict.NO_FILE
    lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
    if any(a < 1 or b < a or b > len(lines) for a, b in citation.ranges):
        return Verdict.NO_LINES
    cited = "\n".join("\n".join(lines[a - 1: b]) for a, b in citation.ranges)
    if citation.symbol:
        name = citation.symbol.split(".")[-1]
        around = {n for a, _ in citation.ranges for n in _enclosing_names(lines, a)}
        if not re.search(rf"\b{re.escape(name)}\b", cited) and name not in around:
            return Verdict.NO_SYMBOL
    if citation.quote and not _quote_found(citation.quote, cited):
        return Verdict.NO_QUOTE
    if not _in_order(citation.code, cited.split("\n")):
        return Verdict.NO_CODE
    return Verdict.OK
