"""Figures to files: one offline HTML page (plotly.js inline) or a static PNG (kaleido and a Chromium)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memtraffic.vocab.errors import ReportError, UsageError
from memtraffic.vocab.extras import install_line
from memtraffic.vocab.files import exists_message, write_bytes_atomic

if TYPE_CHECKING:  # plotly is imported inside the functions: it is slow to import
    import plotly.graph_objects as go


def check_new_file(path: Path, force: bool = False, option: str = "--out") -> None:
    """UsageError unless path can be written as a new file: an existing file needs force; a folder never.
    Checked before the work, to fail fast; the writers check again at the rename (write_page, write_png)."""
    if path.is_dir():
        example = path / ("figure.png" if option == "--png" else "page.html")
        raise UsageError(f"{option} {path} is a folder: give a file name, e.g. {option} {example}")
    if path.exists() and not force:
        raise UsageError(exists_message(path, option))
    if any(p.exists() and not p.is_dir() for p in path.parents):
        raise UsageError(f"{path}: a part of its folder path is a file, not a folder")


def default_output(kind: str, run_dirs: Sequence[Path]) -> Path:
    """Where a page goes without --out: the current folder (never into a run folder), named after the runs."""
    names = [Path(d).resolve().name for d in run_dirs]
    label = names[0] + (f"+{len(names) - 1}" if len(names) > 1 else "")
    return Path(f"{kind}-{label}.html")


def write_page(path: Path, text: str, force: bool = False) -> Path:
    """An HTML page, written whole (a temporary file, then renamed); an existing file is replaced only
    with force, and without it the rename itself refuses a file another process wrote meanwhile."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, text.encode("utf-8"), exclusive=not force)
    return path


def plotly_js() -> str:
    """The <script> with plotly.js inline, for a page's <head>: the page works offline, and every figure's
    script, wherever the page places it, runs after plotly.js is defined."""
    from plotly.offline import get_plotlyjs

    return f"<script type='text/javascript'>{get_plotlyjs()}</script>"


def figures_html(figs: Sequence[go.Figure]) -> list[str]:
    """HTML fragments without plotly.js (the page puts plotly_js() in its head).

    The fixed widths that size the PNGs would cut the three-panel roofline off in a narrower window:
    in HTML each figure takes the width of the page instead.
    """
    import plotly.graph_objects as go

    config = {"displaylogo": False, "responsive": True}
    return [go.Figure(f).update_layout(width=None, autosize=True)
            .to_html(full_html=False, include_plotlyjs=False, config=config) for f in figs]


def write_html(figs: Sequence[go.Figure], path: Path, title: str, notes: Sequence[str] = (),
               force: bool = False) -> Path:
    """A self-contained page holding the figures (no network needed to open it)."""
    import html

    body = "\n".join(f"<div class='fig'>{frag}</div>" for frag in figures_html(figs))
    note_html = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"{plotly_js()}</head>"
            f"<body style='font-family:sans-serif;margin:1em 2em'>\n<h1>{html.escape(title)}</h1>\n{body}\n"
            + (f"<ul>{note_html}</ul>" if notes else "") + "</body></html>\n")
    return write_page(path, page, force)


def write_png(fig: go.Figure, path: Path, width: int | None = None, height: int | None = None,
              force: bool = False) -> Path:
    """Static PNG through kaleido 1.x, which drives a Chromium; say which piece is missing if it fails.
    Written whole as write_page writes (force as there).

    The size defaults to the figure's own (the figures size themselves to their legend and bars)."""
    width = width or fig.layout.width or 1200
    height = height or fig.layout.height or 700
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise ReportError("PNG export needs the kaleido package and a Chromium browser (Debian: apt-get "
                          f"install chromium); HTML output works without them: {install_line('png')}"
                          ) from None
    try:
        data = fig.to_image(format="png", width=width, height=height, scale=1)
    except Exception as err:  # kaleido/choreographer raise plain RuntimeErrors
        text = " ".join(str(err).split())
        if "chrome" in text.lower() or "chromium" in text.lower() or "browser" in text.lower():
            names = ("chromium", "chromium-browser", "google-chrome")
            found = next((p for n in names if (p := shutil.which(n))), None)
            raise ReportError(
                "PNG export needs a Chromium or Chrome browser for kaleido and "
                + (f"the one at {found} failed to start" if found else "none was found")
                + ": install Debian's 'chromium' package (apt-get install -y chromium), or point "
                "BROWSER_PATH at one; HTML output works without it"
            ) from None
        raise ReportError(f"PNG export to {path} failed: {type(err).__name__}: {text[:300]}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, data, exclusive=not force, option="--png")
    return path
