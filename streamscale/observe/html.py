"""Self-contained HTML pages: the opening and end of a page, tables, PNGs as data URIs. No network
fetches: styles are inline, images embedded. A small inline script records how many images decoded
(``data-images-loaded`` on <body>), which the tests check in a headless browser. Used by the
benchmark's report and the autoscaler's reproduction page.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path


def img_tag(path: Path, alt: str) -> str:
    """A PNG embedded as a data URI: the page needs no other file and no network."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'


def html_table(rows: list[dict], cls: str = "") -> str:
    if not rows:
        return "<p><em>none</em></p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3}img{max-width:100%;border:1px solid #ddd}pre{background:#f7f7f7;padding:1em;overflow:auto}
.pass{color:#187a2f;font-weight:bold}.fail,.invalid{color:#b3261e;font-weight:bold}.undecided{color:#9a6a00;font-weight:bold}
.invalid{background:#fff3cd;border:1px solid #e0c36b;padding:.5em}.exp{margin-bottom:2em}"""

_SCRIPT = """<script>
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var ok = imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length;
  document.body.setAttribute('data-images-loaded', ok);
  document.body.setAttribute('data-images-total', imgs.length);
  document.body.setAttribute('data-tables', document.querySelectorAll('table').length);
});
</script>"""


def page_head(title: str) -> str:
    """The opening of a self-contained streamscale page (inline styles)."""
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body>"
    )


def page_tail() -> str:
    """The end of a page: the image-check script the headless-browser tests read."""
    return _SCRIPT + "</body></html>"
