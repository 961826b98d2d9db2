"""Check every citation of vLLM release source in the repository against that release (``make cite-check``).

Reads the tracked text files (Python sources and their docstrings and comments, notebooks'
cells, README, docs/) with ``reference.citations``, fetches each cited
release's sources once into the cache ``make vllm-check`` uses
(``reference.sources``), and checks each citation: the file exists, the
lines exist, the symbol or quote it carries is there. Prints the counts, every failing
citation and every mention it could not parse; exits 1 if any citation fails.

    python tools/cite_check.py              # fetch what is missing, check, report
    python tools/cite_check.py --offline    # check against what is cached; the rest is unparsed

A Python file is one block (a release named in its docstring carries through the file), a
notebook cell is one, and a markdown file has one per section. ``tests/test_citations.py``
and the parser's own docstring hold made-up examples and are not read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

from generated import ROOT

sys.path.insert(0, str(ROOT))

from reference.citations import Block, Citation, Unparsed, Verdict, check, find_citations  # noqa: E402
from reference.sources import cached_sources, release_sources  # noqa: E402

SUFFIXES = (".py", ".md", ".ipynb", ".txt", ".rst")
NOT_READ = ("tests/test_citations.py", "reference/citations.py")


def blocks(path: Path, name: str) -> list[Block]:
    text = path.read_text(encoding="utf-8")
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


def tracked() -> list[str]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [n for n in names if n.endswith(SUFFIXES) and n not in NOT_READ]


def release_files(offline: bool):
    @lru_cache(maxsize=None)
    def files(release: str) -> frozenset[str] | None:
        try:
            root = cached_sources(release) if offline else release_sources(release)
        except (RuntimeError, ValueError) as error:
            print(f"vLLM {release}: {str(error).splitlines()[0]}", file=sys.stderr)
            return None
        if root is None:
            return None
        return frozenset(p.relative_to(root).as_posix() for p in (root / "vllm").rglob("*.py"))
    return files


def survey(offline: bool) -> tuple[list[tuple[Citation, Verdict]], list[Unparsed]]:
    files = release_files(offline)
    results, unparsed = [], []
    for name in tracked():
        for block in blocks(ROOT / name, name):
            found, not_read = find_citations(block, files)
            unparsed += not_read
            for citation in found:
                root = cached_sources(citation.release)
                results.append((citation, check(citation, root) if root else Verdict.NO_FILE))
    return results, unparsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="fetch nothing; use only cached releases")
    args = parser.parse_args(argv)
    results, unparsed = survey(args.offline)
    failing = [(c, v) for c, v in results if v is not Verdict.OK]
    releases = Counter(c.release for c, _ in results)
    for citation, verdict in failing:
        print(f"FAIL {citation.where}: {citation.label}: {verdict.value}")
    for u in unparsed:
        print(f"unparsed {u.where}: {u.why}: {u.text!r}")
    print(f"citations found {len(results) + len(unparsed)}, checked {len(results)}, failing {len(failing)}, "
          f"unparsed {len(unparsed)}; releases: {', '.join(f'{r} ({n})' for r, n in sorted(releases.items()))}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
