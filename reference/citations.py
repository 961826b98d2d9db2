"""Citations of vLLM release source, found in the repository's text and checked against the release.

A citation names a release, a file and lines, and may name a symbol or quote the code:

    vLLM 0.30.0 ``vllm/v1/worker/gpu/pp_utils.py`` 144-154
    (`vllm/v1/worker/gpu_model_runner.py`, `_update_states`, lines 480–488)
    0.9.2 ``gpu_model_runner.py`` lines 1515-1532, 0.14.0 lines 3616-3626
    (vLLM 0.30.0, `model_runner.py` 2022–2023: "Optimistically update num_computed_tokens ...")
    | 0.9.2 | `vllm/v1/worker/gpu_input_batch.py` | `add_request` (266; the copy at 282–290) |

The canonical form is the first: release, path from ``vllm/``, lines. A vLLM release's
``tests/<folder>/...`` and SGLang's ``python/sglang/...`` (its release written "SGLang 0.5.23",
keyed ``"sglang-0.5.23"``) are cited the same way. The parser also reads
the others: a release written before the file in the same paragraph (or, failing that,
earlier in the same block: notebook cell, docstring paragraph run, README section) applies
to it, and one written among the line ranges applies to the ranges after it; a file named
by its base name is the path named earlier in the block with that name, else the one file
of the release with that name; a backticked name between the file and the lines, or a
lone name in brackets after a range, is the symbol; a quotation right after the lines is
the quote. In a markdown table row with a release cell and a file cell, every bracketed
list of line numbers in the row cites that file, with the backticked name before it. Once a
file is named, a bare range further on ("called at 4612-4615") or "lines N" cites the file
named last before it in the block, in the release named since; after one of minispec's own
files it is minispec's and not checked. Any other "line(s) N", or a bare range after a file the
release lacks, is listed as unparsed, so ``make cite-check`` fails on it.

``find_citations`` parses text into ``Citation``s and ``Unparsed`` mentions (a "line N"
it could not attach to a release and a file); ``check`` says whether a citation holds in a
release's sources: the file exists, the lines exist, each range is the one pinned
(``reference.pins``), the symbol is in the lines or is a def or class holding them whole
(parsed with ``ast``), the quote has code in it and is in them. ``tools/cite_check.py`` runs both over the repository
(``make cite-check``).

vLLM twin: none (minispec's own tooling).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from reference import pins

# a vLLM release; another project's ("SGLang 0.5.23", "vllm-ascend 0.23.0") is not one
RELEASE = r"(?<![\w.])(?<!SGLang\s)(?<!ascend\s)(?<!sglang-)(?:vLLM\s+)?v?(0\.\d{1,2}\.\d{1,2})(?:'s)?(?![\w]|\.\d)"
SGLANG_RELEASE_RE = re.compile(r"\bSGLang\s+v?(0\.\d{1,2}\.\d{1,3})(?![\w]|\.\d)")
SGLANG_ROOT = "python/sglang/"
RELEASE_RE = re.compile(RELEASE)
# a path under vllm/ (written with or without "vllm/") or a bare file name, not one of minispec's own
FILE_RE = re.compile(r"(?<![\w/.-])((?:[a-z_][\w]*/)*[a-z_][\w]*\.py)(?![\w/])")
OWN_ROOTS = ("minispec/", "reference/", "tests/", "tools/", "benchmarks/", "docs/", "notebooks/", "seed/", "src/")
RELEASE_ROOTS = ("vllm/", "tests/", "python/sglang/")  # where a path is always a release's (tests/: a folder in it)
ITEM_RE = re.compile(rf"(?:(?P<release>{RELEASE})\s*,?\s*)?(?:lines?\s+)?(?P<start>(?<![\w.])\d{{1,5}})"
                     rf"(?:\s*[-–]\s*(?P<end>\d{{1,5}}))?(?![\w.]*\d)")
# between the file and its first range: punctuation, backticked names, a release, "lines"
GAP_RE = re.compile(rf"(?:[\s,:(`#]|``?[\w.()]+``?|{RELEASE})*?(?:\blines?\s+)?(?=\d)")
SEPARATOR_RE = re.compile(rf"\s*(?:\([^()]*\))?\s*(?:,|;|\band\b|,\s*and\b)\s*(?=(?:{RELEASE}\s*,?\s*)?(?:lines?\s+)?\d)")
NOTE_RE = re.compile(r"\s*\(\s*([A-Za-z_][\w.]*)\s*\)")
# a quote is code or a comment: at least one letter in it (never the gap between joined strings)
QUOTE_RE = re.compile(r"\s*(?:\)|,)?\s*[:(]?\s*\*?[\"“](?=[^\"”]*[A-Za-z_])([^\"”]{8,}?)[\"”]")
SYMBOL_RE = re.compile(r"``?([A-Za-z_][\w.]*)(?:\(\))?``?")
LINE_WORD_RE = re.compile(r"\blines?\s+\d")
RANGE_RE = re.compile(r"(?<![\w.:/#+-])(\d{1,5})\s?[-–]\s?(\d{1,5})(?![\w%]|\.\d|\s?[-–]\s?\d)")
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
        return f"{project_release(self.release)} {self.path} {lines}{extra}"


def project_release(release: str) -> str:
    """How a release key reads: "0.30.0" is "vLLM 0.30.0", "sglang-0.5.23" is "SGLang 0.5.23"."""
    return f"SGLang {release.removeprefix('sglang-')}" if release.startswith("sglang-") else f"vLLM {release}"


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
    NOT_CODE = "the quote has no code in it (no letter: whitespace or punctuation)"
    NOT_PINNED = "no pin for these lines in reference/cite_pins.tsv (tools/cite_check.py --repin records one)"
    PIN_CHANGED = "the lines are not the ones pinned (moved, or the pin is stale)"
    PIN_SYMBOL = "the lines are not inside the symbol they are pinned to"
    NO_PARSE = "the release's file does not parse"


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


# the rest of the sentence up to its colon holds no other line numbers (else the code is theirs)
CODE_RE = re.compile(r"[^\n\d]*?:\s*\n\s*\n?```python\n(.*?)\n```", re.S)


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


def _release_of(name: str, text: str, at: int, after: int, para_start: int) -> str | None:
    """The release a file named at ``at`` is cited in: for SGLang's files the last "SGLang X"
    before it ("sglang-X"), else the vLLM release written between it and its lines (``after``),
    or before it in the paragraph, or before it in the block."""
    if name.startswith(SGLANG_ROOT):
        found = [m.group(1) for m in SGLANG_RELEASE_RE.finditer(text, 0, at)]
        return f"sglang-{found[-1]}" if found else None
    return (_release_before(text, after, at + len(name))
            or _release_before(text, at, para_start) or _release_before(text, at, 0))


def _is_own(name: str) -> bool:
    """minispec's own files; a ``tests/`` path with a folder in it is a release's (minispec's tests are flat)."""
    return name.startswith(OWN_ROOTS) and not re.match(r"tests/\w+/", name)


def _mentions(text: str):
    """Every place in ``text`` that gives line numbers: "line(s) N", and "N-M" with N < M
    (not a span of years)."""
    for m in LINE_WORD_RE.finditer(text):
        yield m.start(), True
    for m in RANGE_RE.finditer(text):
        a, b = int(m.group(1)), int(m.group(2))
        if 1 <= a < b and not (1900 <= a <= 2100 and 1900 <= b <= 2100):
            yield m.start(), False


def find_citations(block: Block, files: Files) -> tuple[list[Citation], list[Unparsed]]:
    """Every citation in ``block``, and every mention of lines that could not be read as one."""
    text = block.text
    citations, consumed = _table_row_citations(block, files)
    unparsed: list[Unparsed] = []
    # (offset, release, path) of each file named, in order; release None: not a release's file
    anchors: list[tuple[int, str | None, str]] = []
    for m in FILE_RE.finditer(text):
        name = m.group(1)
        if any(a <= m.start() < b for a, b in consumed):
            continue
        if _is_own(name):
            anchors.append((m.start(), None, name))
            continue
        para_start = _paragraph_start(text, m.start())
        para_end = text.find("\n\n", m.end())
        para_end = len(text) if para_end < 0 else para_end
        gap = GAP_RE.match(text, m.end(), para_end)
        release = _release_of(name, text, m.start(), gap.end() if gap else m.end(), para_start)
        items, end = _ranges(text, gap.end(), release or "") if gap else ([], m.end())
        if not items:
            # a file named without lines: lines further on may mean it. A path is the release's
            # (if the release cannot say, the lines fail); a base name, only if the release has it.
            known = files(release) if release else None
            path = _resolve_path(name, text, m.start(), known) if known else None
            if path is None and name.startswith(RELEASE_ROOTS):
                path = name
            anchors.append((m.start(), release if path else None, path or name))
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
            unparsed.append(Unparsed(_where(block, m.start()), context,
                                     f"{', '.join(map(project_release, missing))} not available"))
            continue
        if any(p is None for p in paths.values()):
            unparsed.append(Unparsed(_where(block, m.start()), context, f"{name} names no one file of the release"))
            continue
        symbol, quote = _symbol_and_quote(text, gap.group(0), end, para_end)
        anchors += [(m.start(), r, paths[r]) for r in sorted({i[0] for i in items})]
        for r in {i[0] for i in items}:
            citations += _cite(block, m.start(), r, paths[r], [i for i in items if i[0] == r], symbol, quote, end)
    for offset, worded in sorted(_mentions(text)):
        if any(a <= offset < b for a, b in consumed):
            continue
        before = [a for a in anchors if a[0] < offset]
        if not before and not worded:
            continue  # a number range before any file is named: not a line number
        if before and before[-1][1] is None:
            continue  # lines of minispec's own file, or of a file no release holds: not checked here
        found, end, why = _continued(block, offset, before[-1], files) if before else (
            [], offset, "a line number with no file before it")
        citations += found
        if found:
            consumed.append((offset, end))
        else:
            around = text[max(0, offset - 60): offset + 20].replace("\n", " ")
            unparsed.append(Unparsed(_where(block, offset), around, why))
    return citations, unparsed


def _continued(block: Block, offset: int, anchor: tuple[int, str, str],
               files: Files) -> tuple[list[Citation], int, str]:
    """Lines with no file of their own ("lines N", or a bare "N-M" once a file is named): the
    file named last before them in the block, in the release named since (else that file's)."""
    at, release, path = anchor
    text = block.text
    if not release.startswith("sglang-"):
        release = _release_before(text, offset, at) or release
    known = files(release)
    if known is None:
        return [], offset, f"{project_release(release)} not available"
    if path not in known:
        return [], offset, f"{path} is not a file of {project_release(release)}"
    para_end = text.find("\n\n", offset)
    para_end = len(text) if para_end < 0 else para_end
    items, end = _ranges(text, offset, release)
    preceding = re.search(r"``?([A-Za-z_][\w.]*)(?:\(\))?``?[\s,(]*$", text[max(0, offset - 60): offset])
    symbol = preceding.group(1) if preceding and not preceding.group(1).endswith(".py") else None
    quote = QUOTE_RE.match(text, end, para_end)
    return _cite(block, offset, release, path, items, symbol, quote.group(1) if quote else None, end), end, ""


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


def _symbol_holds(symbol: str, source: Path, ranges, cited: str) -> bool:
    """The symbol named is a def or class holding every range whole (``Class.method`` or its
    last part), or a name the lines use."""
    if re.search(rf"\b{re.escape(symbol.split('.')[-1])}\b", cited):
        return True
    return all(any(n == symbol or n.endswith("." + symbol) for n in pins.enclosing(source, a, b)) for a, b in ranges)


def check(citation: Citation, root: Path, pinned: dict[pins.Key, pins.Pin] | None = None) -> Verdict:
    """Whether ``citation`` holds in the release whose files are under ``root``; with
    ``pinned`` (``pins.load()``), also whether each range is the one pinned."""
    source = root / citation.path
    if not source.is_file():
        return Verdict.NO_FILE
    lines = source.read_text(encoding="utf-8", errors="replace").splitlines()
    if any(a < 1 or b < a or b > len(lines) for a, b in citation.ranges):
        return Verdict.NO_LINES
    cited = "\n".join("\n".join(lines[a - 1: b]) for a, b in citation.ranges)
    try:
        if citation.symbol and not _symbol_holds(citation.symbol, source, citation.ranges, cited):
            return Verdict.NO_SYMBOL
        for a, b in citation.ranges if pinned is not None else ():
            want = pinned.get((citation.release, citation.path, a, b))
            got = pins.pin(source, lines, a, b)
            if want is None:
                return Verdict.NOT_PINNED
            if want.digest != got.digest:
                return Verdict.PIN_CHANGED
            if want.symbol != got.symbol:
                return Verdict.PIN_SYMBOL
    except SyntaxError:
        return Verdict.NO_PARSE
    if citation.quote is not None and not re.search(r"[A-Za-z_]", citation.quote):
        return Verdict.NOT_CODE
    if citation.quote and not _quote_found(citation.quote, cited):
        return Verdict.NO_QUOTE
    if not _in_order(citation.code, cited.split("\n")):
        return Verdict.NO_CODE
    return Verdict.OK
