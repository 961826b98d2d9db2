"""Every GitHub pull request and issue the repository cites, once: ``THREADS``.

Each ``Thread`` holds what the repository relies on: its number and repository, its title,
its state when it was last checked (``CHECKED``), the posts cited (``Post``: its kind, its
date, the sentences quoted from it), how that was verified (``Verified``, with a note where
the check could not settle everything). The fault presets (``minispec.lab.faults.catalogue``)
and the timeline (``minispec.lab.faults.pp_sync``) take their references from here, as
``Thread`` and ``Citation`` objects looked up by number (``thread``): a post or a quote
the table does not hold cannot be cited. Prose (docstrings, comments, notebooks, the
README, docs) cites by number; ``tests/test_threads.py`` fails on a reference anywhere
that is not here, on an entry nothing cites, and on a date or a quoted sentence next to
a reference in prose that the table does not hold for that thread.

The entries are data, ``threads.json`` beside this file (shipped as package data): one object
per thread, its kind, state, verification and each post's kind written as the enum member's
name; ``load_threads`` builds and checks them. ``tools/cite_check.py`` reads the notes' release
citations there as it reads code.

The threads were read in a stored index of GitHub threads (pull requests and issues of
vLLM, SGLang, vllm-ascend and others), which holds each thread's posts as excerpts with
their dates, and found again on ``CHECKED`` with the search tool over that index, which
returns one excerpt of a thread per hit; where a post could not be found again, the entry is
``PARTLY`` verified and its note says which. Two threads are cited without being read
(``CITED_IN_SOURCE``, ``NOT_READ``).

vLLM twin: none (references, not code).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from pathlib import Path

CHECKED = date(2026, 12, 2)  # when every state below was read, and every post found again
VLLM = "vllm-project/vllm"
SGLANG = "sgl-project/sglang"
_PROJECTS = {VLLM: "vLLM", SGLANG: "SGLang", "vllm-project/vllm-ascend": "vllm-ascend",
             "jupyterlab/jupyterlab": "JupyterLab", "vllm-project/vllm-gaudi": "vllm-gaudi",
             "tenstorrent/vllm-tt-plugin": "vllm-tt-plugin"}


class ThreadKind(StrEnum):
    PULL = "pull"
    ISSUE = "issues"  # as GitHub's URL spells it


class ThreadState(StrEnum):
    MERGED = "merged"
    OPEN = "open"
    CLOSED = "closed"
    NOT_READ = "not read"  # the thread itself was not read (see Verified)


class Verified(StrEnum):
    SEARCHED = "every post listed found again with the search tool (corpus issues) on CHECKED"
    PARTLY = ("its title and state found again with the search tool on CHECKED, not every post listed (the tool "
              "returns excerpts): see the entry's note")
    TITLE = "its title and state read in the stored index; no post of it is quoted"
    CITED_IN_SOURCE = "not read; cited in vLLM's own source"
    NOT_READ = "not read: not a vLLM thread, cited for a JupyterLab behaviour seen in use"


class PostKind(StrEnum):
    DESCRIPTION = "description"
    COMMENT = "comment"
    REVIEW = "review"


@dataclass(frozen=True)
class Post:
    """One post of a thread the repository cites: when, and the sentences it quotes from it."""

    kind: PostKind
    posted: date
    quotes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Thread:
    repo: str  # "owner/name"
    number: int
    kind: ThreadKind
    title: str  # "" where the index does not hold the thread
    state: ThreadState
    verified: Verified
    posts: tuple[Post, ...] = ()  # the posts cited, earliest first
    note: str = ""  # what the verification could not settle, or where the code it changed was read

    def __post_init__(self):
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", self.repo) or self.number <= 0:
            raise ValueError(f"Thread({self.repo!r}, {self.number}): expected 'owner/name' and a positive number")
        if self.verified in (Verified.SEARCHED, Verified.PARTLY) and not (self.title and self.posts):
            raise ValueError(f"{self.label}: found with the search tool, so its title and a post are expected")
        if self.posts and not self.title:
            raise ValueError(f"{self.label}: a post is listed, so the thread was read: its title is expected")
        if [p.posted for p in self.posts] != sorted(p.posted for p in self.posts):
            raise ValueError(f"{self.label}: posts are listed earliest first")

    @property
    def label(self) -> str:
        prefix = "" if self.repo == VLLM else self.repo.split("/")[1] + " "
        return f"{prefix}#{self.number}"

    @property
    def name(self) -> str:
        """How prose names it: "vLLM PR #50514", "vLLM RFC #44697", "vllm-ascend PR #15171"."""
        kind = "RFC" if self.title.startswith("[RFC]") else "PR" if self.kind is ThreadKind.PULL else "issue"
        return f"{_PROJECTS.get(self.repo, self.repo)} {kind} #{self.number}"

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{self.kind}/{self.number}"

    @property
    def posted(self) -> date | None:
        """The date of its earliest post cited."""
        return self.posts[0].posted if self.posts else None

    @property
    def quotes(self) -> tuple[str, ...]:
        return tuple(q for p in self.posts for q in p.quotes)

    def post(self, posted: date) -> Post:
        for p in self.posts:
            if p.posted == posted:
                return p
        raise KeyError(f"{self.label} has no post of {posted} in THREADS (it lists {[str(p.posted) for p in self.posts]})")


@dataclass(frozen=True)
class Citation:
    """What the repository says of a thread, drawn from the table: the thread, the post
    cited (by its date; ``None``: the thread as a whole), a sentence quoted from that post
    (the whole of one of its quotes, or a part), and what it is cited for, in the
    repository's own words. A post or quote the table does not hold is a ``KeyError``."""

    thread: Thread
    posted: date | None = None
    quote: str = ""
    role: str = ""

    def __post_init__(self):
        if self.posted is None and self.quote:
            raise ValueError(f"Citation of {self.thread.label}: a quote needs the post it is from (posted=)")
        if self.posted is not None:
            post = self.thread.post(self.posted)
            if self.quote and not any(self.quote in q for q in post.quotes):
                raise KeyError(f"{self.thread.label}'s {post.kind} of {post.posted} has no quote containing "
                               f"{self.quote!r} in THREADS")

    def render(self) -> str:
        said = f"{self.thread.name} ({self.thread.state}"
        if self.posted is not None:
            post = self.thread.post(self.posted)
            said += f"; its {post.kind} of {post.posted}" + (f": \"{self.quote}\"" if self.quote else "")
        return said + ")" + (f": {self.role}" if self.role else "")


TABLE = Path(__file__).with_name("threads.json")  # the entries, as data: one object per thread


def _post(row: dict) -> Post:
    return Post(PostKind[row["kind"]], date.fromisoformat(row["posted"]), tuple(row.get("quotes", ())))


def _thread(row: dict) -> Thread:
    return Thread(row["repo"], row["number"], ThreadKind[row["kind"]], row["title"], ThreadState[row["state"]],
                  Verified[row["verified"]], tuple(_post(p) for p in row.get("posts", ())), row.get("note", ""))


def load_threads(path: Path = TABLE) -> tuple[Thread, ...]:
    """Every entry of the table file, checked as each ``Thread`` is built; a malformed entry is
    named by its position and the field that is wrong or missing."""
    rows = json.loads(path.read_text(encoding="utf-8"))
    threads = []
    for i, row in enumerate(rows):
        try:
            threads.append(_thread(row))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path.name} entry {i} ({row.get('repo')}#{row.get('number')}): expected a thread "
                             f"with repo, number, kind, title, state, verified and dated posts; {error!r}") from None
    return tuple(threads)


THREADS: tuple[Thread, ...] = load_threads()

# A reference in prose: "owner/name#N", "sglang #N" / "vllm-ascend PR #N" / "JupyterLab issue #N", a
# bare "#N" (vLLM's), or a thread's URL. Colours ("#999999") are quoted or run on into letters.
_NAMED = {"sglang": SGLANG, "vllm-ascend": "vllm-project/vllm-ascend",
          "jupyterlab": "jupyterlab/jupyterlab", "vllm-gaudi": "vllm-project/vllm-gaudi",
          "vllm-tt-plugin": "tenstorrent/vllm-tt-plugin"}
REFERENCE = re.compile(
    r"github\.com/(?P<url_repo>[\w.-]+/[\w.-]+)/(?:pull|issues)/(?P<url_num>\d+)"
    r"|(?P<repo>[\w.-]+/[\w.-]+)#(?P<repo_num>\d+)"
    r"|(?:(?P<name>sglang|vllm-ascend|jupyterlab|vllm-gaudi|vllm-tt-plugin)\s+(?:(?:pr|issue|rfc)\s+)?)?(?<![\"'\w&])#(?P<num>[1-9]\d{2,5})(?!\w)",
    re.IGNORECASE,
)


def references(text: str) -> set[tuple[str, int]]:
    """Every (repository, number) the text refers to."""
    found = set()
    for m in REFERENCE.finditer(text):
        if m.group("url_repo"):
            found.add((m.group("url_repo"), int(m.group("url_num"))))
        elif m.group("repo"):
            found.add((m.group("repo"), int(m.group("repo_num"))))
        else:
            repo = _NAMED[m.group("name").lower()] if m.group("name") else VLLM
            found.add((repo, int(m.group("num"))))
    return found


def thread(repo: str, number: int) -> Thread:
    """The table's entry for a reference; KeyError, naming it, if it has none."""
    for t in THREADS:
        if (t.repo, t.number) == (repo, number):
            return t
    raise KeyError(f"{repo}#{number} is cited but not in minispec.lab.records.threads.THREADS: add it, with its source")
