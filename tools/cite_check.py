"""Check every citation of release source in the repository against that release (``make cite-check``).

Reads the tracked text files (Python sources and their docstrings and comments, notebooks'
cells, README, docs/) with ``reference.citations``, fetches each cited release's sources once
into the cache ``make vllm-check`` uses (vLLM's wheel, ``reference.sources``; vLLM's
``tests/`` from its sdist and SGLang's wheel, ``reference.more_sources``), and checks each
citation: the file exists, the lines exist, each range is the one pinned in
``reference/cite_pins.tsv`` (``reference.pins``: its hash and the symbol around it), the
symbol, quote or code it carries is there. Prints the counts, every failing citation and
every mention of lines it could not read.

It fails closed: exit 1 if a citation fails, a mention of lines is not read as a citation,
a release cannot be fetched, or a pin is used by no citation.

    python tools/cite_check.py              # fetch what is missing, check, report (CI)
    python tools/cite_check.py --offline    # fetch nothing: what is not cached is skipped, and counted
    python tools/cite_check.py --repin      # record the pins of the ranges cited now; print what changed

A Python file is one block (a release named in its docstring carries through the file), a
notebook cell is one, a markdown file has one per section (the fidelity pages, ``docs/fidelity/``,
hold most of the release lines that used to sit in ``minispec/v1``'s docstrings), and each entry's
note in a data file of ``DATA`` (the cited threads' table) is one. ``tests/test_citations.py``
and the parser's own docstring hold made-up examples and are not read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from generated import ROOT

sys.path.insert(0, str(ROOT))

from reference import pins  # noqa: E402
from reference.citations import Block, Citation, Unparsed, Verdict, check, find_citations, project_release  # noqa: E402
from reference.more_sources import cached_sglang, cached_tests, release_tests, sglang_sources  # noqa: E402
from reference.sources import cached_sources, release_sources  # noqa: E402

SUFFIXES = (".py", ".md", ".ipynb", ".txt", ".rst")
NOT_READ = ("tests/test_citations.py", "reference/citations.py")
# data files whose entries' notes cite releases: each entry's "note" is one block
DATA = ("minispec/lab/records/threads.json",)


def blocks(path: Path, name: str) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    if name.endswith(".json") and Path(name).name in {Path(d).name for d in DATA}:
        entries = json.loads(text)
        return [Block(f"{name} entry {i}", e["note"]) for i, e in enumerate(entries) if e.get("note")]
    if name.endswith(".ipynb"):
        cells = json.loads(text)["cells"]
        return [Block(f"{name} cell {i}", "".join(c["source"])) for i, c in enumerate(cells)]
    if name.endswith(".py"):
        return [Block(name, text, 1)]
    out, start, lines = [], 0, text.split("\n")
    for i, line in enumerate(lines + ["# end"]):
        if line.startswith("#") and i > start:
            out.append(Block(name, "\n".join(lines[start:i]), start + 1))
            start = i
    return out


def tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / n for n in names if (n.endswith(SUFFIXES) or n in DATA) and n not in NOT_READ]


class ReleaseFiles(frozenset):
    """A release's file paths; its ``tests/`` are asked for (and fetched) only when a citation names one."""

    tests: Callable[[], frozenset[str] | None]

    def __new__(cls, paths, tests):
        made = super().__new__(cls, paths)
        made.tests = tests
        return made

    def __contains__(self, path) -> bool:
        if isinstance(path, str) and path.startswith("tests/"):
            found = self.tests()  # None: not to be had; the citation is then counted as skipped, or fails
            return found is None or path in found
        return frozenset.__contains__(self, path)


def _listing(root: Path, package: str) -> frozenset[str]:
    return frozenset(p.relative_to(root).as_posix() for p in (root / package).rglob("*.py"))


@dataclass
class Fetcher:
    """Each release's folder, fetched once (or, ``offline``, only what is cached); what could
    not be fetched, and why."""

    offline: bool
    failed: dict[str, str] = field(default_factory=dict)  # release -> why it is not here

    def root(self, release: str) -> Path | None:
        sglang = release.startswith("sglang-")
        try:
            if self.offline:
                root = cached_sglang(release) if sglang else cached_sources(release)
            else:
                root = sglang_sources(release) if sglang else release_sources(release)
        except (RuntimeError, ValueError, OSError) as error:
            self.failed[release] = str(error).splitlines()[0]
            return None
        if root is None:
            self.failed[release] = "not cached (--offline)"
        return root

    def tests(self, release: str) -> Path | None:
        try:
            root = cached_tests(release) if self.offline else release_tests(release)
        except (RuntimeError, ValueError, OSError) as error:
            self.failed[f"{release} tests"] = str(error).splitlines()[0]
            return None
        if root is None:
            self.failed[f"{release} tests"] = "not cached (--offline)"
        return root

    def files(self) -> Callable[[str], ReleaseFiles | None]:
        @lru_cache(maxsize=None)
        def tests_of(release: str) -> frozenset[str] | None:
            root = self.tests(release)
            return _listing(root, "tests") if root else None

        @lru_cache(maxsize=None)
        def files(release: str) -> ReleaseFiles | None:
            root = self.root(release)
            if root is None:
                return None
            package = "python/sglang" if release.startswith("sglang-") else "vllm"
            return ReleaseFiles(_listing(root, package), lambda: tests_of(release))
        return files


@dataclass
class Survey:
    results: list[tuple[Citation, Verdict]]
    unparsed: list[Unparsed]
    skipped: list[Unparsed]  # mentions of a release that could not be had (offline: not cached)
    failed: dict[str, str]  # release -> why it could not be had
    stale: list[pins.Key]  # pins no citation uses


def survey(offline: bool, paths: list[Path] | None = None, pinned: dict | None = None) -> Survey:
    """Every citation in ``paths`` (default: the tracked text files) checked against its
    release and ``pinned`` (default: the table)."""
    fetcher = Fetcher(offline)
    files = fetcher.files()
    pinned = pins.load() if pinned is None else pinned
    results, unparsed = [], []
    for path in tracked() if paths is None else paths:
        name = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        for block in blocks(path, name):
            found, not_read = find_citations(block, files)
            unparsed += not_read
            for citation in found:
                tests = citation.path.startswith("tests/")
                root = fetcher.tests(citation.release) if tests else fetcher.root(citation.release)
                if root is None:  # the release's tests could not be had
                    unparsed.append(Unparsed(citation.where, citation.label, f"{citation.release} tests not available"))
                else:
                    results.append((citation, check(citation, root, pinned)))
    unavailable = [u for u in unparsed if u.why.endswith("not available")]
    used = {(c.release, c.path, a, b) for c, _ in results for a, b in c.ranges}
    stale = sorted(set(pinned) - used) if paths is None and not fetcher.failed else []
    return Survey(results, [u for u in unparsed if u not in unavailable], unavailable, fetcher.failed, stale)


def repin(found: Survey, pinned: dict) -> dict:
    """The table for the ranges cited now; prints each row added, changed or dropped."""
    fresh = {}
    for citation, verdict in found.results:
        if verdict in (Verdict.NO_FILE, Verdict.NO_LINES, Verdict.NO_PARSE):
            continue
        root = cached_tests(citation.release) if citation.path.startswith("tests/") else (
            cached_sglang(citation.release) if citation.release.startswith("sglang-") else
            cached_sources(citation.release))
        lines = (root / citation.path).read_text(encoding="utf-8", errors="replace").splitlines()
        for a, b in citation.ranges:
            fresh[(citation.release, citation.path, a, b)] = pins.pin(root / citation.path, lines, a, b)
    for key in sorted(set(pinned) | set(fresh)):
        old, new = pinned.get(key), fresh.get(key)
        if old != new:
            row = f"{project_release(key[0])} {key[1]} {key[2]}-{key[3]}"
            print(f"{'added' if old is None else 'dropped' if new is None else 'changed'} {row}: "
                  f"{old.symbol + ' ' + old.digest if old else ''}{' -> ' if old and new else ''}"
                  f"{new.symbol + ' ' + new.digest if new else ''}")
    return fresh


def main(argv=None, paths: list[Path] | None = None) -> int:
    """``paths``: check only these files (the tests' planted texts); default, the tracked ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="fetch nothing: check what is cached, count the rest")
    parser.add_argument("--repin", action="store_true", help="record the pins of the ranges cited now")
    args = parser.parse_args(argv)
    if args.repin and paths is not None:
        raise ValueError("paths: --repin records the pins of the whole repository; expected paths=None")
    pinned = pins.load()
    found = survey(args.offline, paths, pinned={} if args.repin else pinned)
    if args.repin:
        if found.failed:
            print(f"not repinned: could not fetch {', '.join(found.failed)}")
            return 1
        pins.save(repin(found, pinned))
        found = survey(args.offline)
    failing = [(c, v) for c, v in found.results if v is not Verdict.OK]
    for citation, verdict in failing:
        print(f"FAIL {citation.where}: {citation.label}: {verdict.value}")
    for u in found.unparsed:
        print(f"unparsed {u.where}: {u.why}: {u.text!r}")
    for key in found.stale:
        print(f"stale pin {project_release(key[0])} {key[1]} {key[2]}-{key[3]}: no citation uses it (--repin drops it)")
    for release, why in found.failed.items():
        print(f"{'skipped' if args.offline else 'FAIL'} {project_release(release)}: {why}")
    releases = Counter(project_release(c.release) for c, _ in found.results)
    ranges = {(c.release, c.path, a, b) for c, _ in found.results for a, b in c.ranges}
    held = {(c.release, c.path, a, b) for c, v in found.results if v is Verdict.OK for a, b in c.ranges}
    print(f"citations found {len(found.results) + len(found.unparsed) + len(found.skipped)}, "
          f"checked {len(found.results)}, failing {len(failing)}, unparsed {len(found.unparsed)}, "
          f"skipped {len(found.skipped)}; ranges {len(ranges)}, pinned and holding {len(held)}; "
          f"releases: {', '.join(f'{r} ({n})' for r, n in sorted(releases.items()))}")
    if args.offline and found.skipped:
        print(f"--offline: {len(found.skipped)} citations skipped ({', '.join(found.failed)} not cached); "
              f"make cite-check checks them all")
    closed = failing or found.unparsed or found.stale or (found.failed and not args.offline)
    return 1 if closed else 0


if __name__ == "__main__":
    sys.exit(main())
