"""What a notebook shows, readable everywhere: in Jupyter, on GitHub, in an nbconvert HTML export, and when
the notebook's .py source runs as plain Python.

A plotly figure goes out as plotly's own mime type (interactive in JupyterLab and VS Code) with a static PNG
beside it, which GitHub and nbconvert show since they run no plotly.js; markdown text as Markdown, or
printed; anything else through IPython's display, or printed.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # IPython and plotly are optional: imported where used
    import plotly.graph_objects as go
    from IPython.core.interactiveshell import InteractiveShell


def _shell() -> InteractiveShell | None:
    """The running IPython shell (a notebook kernel), or None in plain Python."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell: InteractiveShell | None = get_ipython()  # IPython leaves it untyped
    return shell


def figure_bundle(fig: go.Figure) -> dict[str, object]:
    """The mime bundle of a plotly figure: plotly's JSON, a PNG (kaleido and a Chromium; left out, and the
    text says so, where they are missing), and a line of text."""
    title = fig.layout.title.text or "figure"
    text = cast(str, fig.to_json())  # plotly's inferred type adds None, which it never returns here
    bundle: dict[str, object] = {"application/vnd.plotly.v1+json": {**json.loads(text),
                                                                    "config": {"displaylogo": False}}}
    try:
        png = fig.to_image(format="png", width=fig.layout.width or 1100, height=fig.layout.height or 600)
    except Exception as err:  # no kaleido, or no Chromium for it: the interactive figure still shows
        from memtraffic.vocab.extras import install_line

        bundle["text/plain"] = (f"[{title}: no static image ({type(err).__name__}); {install_line('png')} "
                                "and a Chromium]")
        return bundle
    bundle["image/png"] = base64.b64encode(png).decode("ascii")
    bundle["text/plain"] = f"[{title}]"
    return bundle


def show(obj: Any) -> None:
    """Display a markdown string, a plotly figure, a DataFrame (or anything IPython displays) so that every
    reader sees it; in plain Python print it (a figure as its title: run the notebook to draw it)."""
    shell = _shell()
    is_figure = hasattr(obj, "to_plotly_json")
    is_table = hasattr(obj, "to_html") and hasattr(obj, "to_string") and not is_figure  # a DataFrame
    if shell is None:
        if is_figure:
            print(f"[figure: {obj.layout.title.text or 'untitled'}]")
        else:
            print(obj.to_string(index=False) if is_table else obj)
        return
    from IPython.display import display

    if isinstance(obj, str):  # the text itself where markdown is not rendered, not Markdown's repr
        display({"text/markdown": obj, "text/plain": obj}, raw=True)
    elif is_figure:
        display(figure_bundle(obj), raw=True)
    elif is_table:  # without the row numbers, the same HTML on every run (no styler ids)
        display({"text/html": obj.to_html(index=False, border=0), "text/plain": obj.to_string(index=False)},
                raw=True)
    else:
        display(obj)
