"""Render the course as static HTML into site/ from the stored notebook outputs (`make site`).

One page per notebook (nbconvert's "basic" template: the cells only, no <script> at all), an
index in course order titled from each notebook's first Markdown heading, and prev/next links.
No kernel runs: the charts are the PNGs stored beside each chart's live view by
`scripts/execute_notebooks.py` (labkit.viz._static). Every page is self-contained: CSS inline,
images as data: URIs, and a Content-Security-Policy that forbids any request off the page, so
the site reads the same offline, from a USB stick or as a printed hand-out.
Usage: python scripts/render_site.py [--out site] [--notebooks notebooks]
"""
from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OUT = ROOT / "site"

# Nothing may be fetched: images are data: URIs and styles are inline. Links (navigation) are
# not requests a page makes, so reading links in the prose keep working when online.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       max-width: 980px; margin: 0 auto; padding: 0 16px 48px; color: #1b1b1b; line-height: 1.5; }
nav { display: flex; justify-content: space-between; gap: 12px; padding: 10px 0;
      border-bottom: 1px solid #ddd; margin-bottom: 16px; font-size: 14px; }
nav.bottom { border-top: 1px solid #ddd; border-bottom: none; margin-top: 24px; }
a { color: #1a5fb4; }
pre, code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; }
pre { white-space: pre-wrap; word-wrap: break-word; margin: 0; }
.jp-Cell, .cell { margin: 10px 0; }
.input_area, .jp-InputArea-editor, div.highlight { background: #f6f8fa; border: 1px solid #e1e4e8;
       border-radius: 4px; padding: 6px 8px; overflow-x: auto; }
.prompt, .jp-InputPrompt, .jp-OutputPrompt { display: none; }
.output_area, .jp-OutputArea-output { padding: 4px 0 4px 10px; overflow-x: auto; }
.output_stderr, .jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"] { background: #fff5f5; }
img { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f2f2f2; }
ul.course { list-style: none; padding-left: 0; } ul.course li { margin: 6px 0; }
.anchor-link { display: none; }
"""

HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def course_notebooks(folder: Path) -> list[Path]:
    """The course's notebooks in order: ``NN_name.ipynb`` sorted by their number."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def notebook_title(nb) -> str:
    """The text of the first Markdown heading in ``nb`` (inline Markdown marks removed)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = HEADING.search(cell.source)
            if m:
                return re.sub(r"[*_`]", "", m.group(1)).strip()
    raise ValueError("nb: has no Markdown heading to title its page with")


def _exporter():
    from nbconvert import HTMLExporter
    from pygments.formatters import HtmlFormatter

    exporter = HTMLExporter(template_name="basic")  # the cells only: no require.js, no MathJax
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    return exporter, HtmlFormatter(style="default").get_style_defs(".highlight")


def _page(title: str, body: str, nav: str, css: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{css}</style>\n</head>\n<body>\n"
        f"<nav class=\"top\">{nav}</nav>\n<main>\n{body}\n</main>\n"
        f"<nav class=\"bottom\">{nav}</nav>\n</body>\n</html>\n"
    )


def _nav(prev: tuple[str, str] | None, nxt: tuple[str, str] | None) -> str:
    left = (f'<a rel="prev" href="{prev[0]}">&larr; {html.escape(prev[1])}</a>' if prev else "<span></span>")
    right = (f'<a rel="next" href="{nxt[0]}">{html.escape(nxt[1])} &rarr;</a>' if nxt else "<span></span>")
    return f'{left}<a href="index.html">Contents</a>{right}'


def build(out: Path = OUT, notebooks: Path = NOTEBOOKS) -> list[Path]:
    """Write ``out``/index.html and one ``NN_name.html`` per course notebook in ``notebooks``;
    returns the pages written, index first."""
    paths = course_notebooks(notebooks)
    if not paths:
        raise ValueError(f"notebooks: no NN_name.ipynb files in {notebooks}")
    out.mkdir(parents=True, exist_ok=True)
    exporter, pyg_css = _exporter()
    css = CSS + pyg_css
    nbs = [nbformat.read(p, as_version=4) for p in paths]
    pages = [(p.stem + ".html", notebook_title(nb)) for p, nb in zip(paths, nbs)]
    names = {p.name for p in paths}
    written = []
    for i, (nb, (name, title)) in enumerate(zip(nbs, pages)):
        body, _ = exporter.from_notebook_node(nb)
        # links between notebooks point at their pages
        body = re.sub(r'href="(\d\d_[\w\-]+)\.ipynb(#[^"]*)?"',
                      lambda m: f'href="{m.group(1)}.html{m.group(2) or ""}"'
                      if m.group(1) + ".ipynb" in names else m.group(0), body)
        nav = _nav(pages[i - 1] if i else None, pages[i + 1] if i + 1 < len(pages) else None)
        (out / name).write_text(_page(title, body, nav, css), encoding="utf-8")
        written.append(out / name)
    items = "\n".join(f'<li><a href="{n}">{html.escape(t)}</a></li>' for n, t in pages)
    index = (f"<h1>Credit Assignment Lab</h1>\n<p>The course's notebooks with their stored outputs "
             f"(charts as pictures of their first state). To move the sliders, open the notebooks in "
             f"JupyterLab (<code>make lab</code>).</p>\n<ul class=\"course\">\n{items}\n</ul>")
    first = pages[0]
    (out / "index.html").write_text(
        _page("Credit Assignment Lab", index, _nav(None, first), css), encoding="utf-8")
    return [out / "index.html", *written]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--notebooks", type=Path, default=NOTEBOOKS)
    args = ap.parse_args(argv)
    pages = build(args.out, args.notebooks)
    size = sum(p.stat().st_size for p in pages)
    print(f"{len(pages)} pages, {size / 1e6:.1f} MB in {args.out}/ (open {args.out / 'index.html'})")


if __name__ == "__main__":
    main(sys.argv[1:])
