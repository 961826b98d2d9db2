"""Where the site's source lives: a download of the commit it was built from, and the
repository's address where git knows one.

At the end of an HTML build, ``git archive`` writes the built commit's tree to
``_downloads/minispec-source.tar.gz`` in the site (its files under ``minispec-<commit>/``), so a reader who has only the site (a
copy on a stick, a phone offline) can still get the code every page shows. Each page's
footer links it, and the address of the ``origin`` remote when ``git remote get-url origin``
gives one that is a URL (its user name and password left out); with no such remote the
footer names none, rather than guess one. A tree that is not a git checkout (an unpacked
release) gets neither. Uncommitted changes are not in the download: the footer's commit
line already says when the pages were built with some. The file's name does not change from
commit to commit: an incremental build rewrites only the pages whose sources changed, and every
other page's link must still reach the archive the last build wrote.

Also here, because every page needs them: the copy buttons on code blocks (the maintained
``sphinx_copybutton`` extension) and the print view, which opens every fold
(``_static/minispec-print.css`` for browsers that style ``::details-content``,
``_static/minispec-print.js`` opening ``<details>`` on ``beforeprint`` for the others).
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
DOWNLOADS = "_downloads"


def _git(root: Path, *args: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


@cache
def commit(root: Path = ROOT) -> str | None:
    """The short id of the commit checked out in ``root``, or None outside a git checkout."""
    return _git(root, "rev-parse", "--short=12", "HEAD")


ARCHIVE = "minispec-source.tar.gz"


def archive_name(root: Path = ROOT) -> str | None:
    return ARCHIVE if commit(root) else None


def archive_folder(root: Path = ROOT) -> str:
    """The one folder the archive's files sit under: the commit they are from."""
    return f"minispec-{commit(root)}"


_SCP_LIKE = re.compile(r"^[\w.-]+@([\w.-]+):(.+)$")  # git@host:owner/name.git


def repository_address(root: Path = ROOT) -> str | None:
    """``origin``'s address as a reader can use it, or None: no remote, or one that is a path on
    the building machine (nobody else can reach it). Credentials in the URL are dropped."""
    url = _git(root, "remote", "get-url", "origin")
    if url is None:
        return None
    if scp := _SCP_LIKE.match(url):
        return f"{scp[1]}:{scp[2]}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ssh", "git") or not parts.hostname:
        return None
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def write_archive(out: Path, root: Path = ROOT) -> Path | None:
    """The built commit's tree as ``out/_downloads/minispec-source.tar.gz``, files under
    ``minispec-<commit>/``."""
    name = archive_name(root)
    if name is None:
        return None
    (out / DOWNLOADS).mkdir(exist_ok=True)
    path = out / DOWNLOADS / name
    subprocess.run(["git", "-C", str(root), "archive", "--format=tar.gz", f"--prefix={archive_folder(root)}/",
                    "-o", str(path), "HEAD"], check=True)
    return path


def footer_line(pathto) -> str:
    """The footer's source line for one page (``pathto``: Sphinx's, for the relative link)."""
    name = archive_name()
    if name is None:
        return ""
    line = (f'<p class="minispec-source">Source: <a href="{pathto(f"{DOWNLOADS}/{name}", 1)}" download>{name}</a> '
            "(the tree of the commit this site was last built from)")
    if address := repository_address():
        href = address if "://" in address else None
        line += " · repository: " + (f'<a href="{href}">{address}</a>' if href else f"<code>{address}</code>")
    return line + "</p>"


def on_page(app, pagename, templatename, context, doctree) -> None:
    context["theme_extra_footer"] = context.get("theme_extra_footer", "") + footer_line(context["pathto"])


def on_finished(app, error) -> None:
    if error is None and app.builder.format == "html":
        write_archive(Path(app.outdir))


def setup(app):
    app.setup_extension("sphinx_copybutton")
    app.add_css_file("minispec-print.css")
    app.add_js_file("minispec-print.js")
    app.connect("html-page-context", on_page)
    app.connect("build-finished", on_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
