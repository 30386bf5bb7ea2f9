"""Render the course as static HTML into site/ from the stored notebook outputs (`make site`).

One page per notebook (nbconvert's "basic" template: the cells only, no <script> at all), an
index in course order giving each notebook's question, time and prerequisites, a page per
workshop plan and per instructor's guide (notebooks/guide/*.md), and links between all pages.
No kernel runs: the charts are the PNGs stored beside each chart's live view by
`scripts/execute_notebooks.py` (labkit.viz._static). Every page is self-contained: CSS inline,
images as data: URIs, math as MathML converted here from its TeX (browsers draw MathML
themselves, no script), and a Content-Security-Policy that forbids any request off the page, so
the site reads the same offline, from a USB stick or as a printed hand-out.
Usage: python scripts/render_site.py [--out site] [--notebooks notebooks] [--outline data/course/outline.csv]
"""
from __future__ import annotations

import argparse
import csv
import html
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OUTLINE = ROOT / "data" / "course" / "outline.csv"
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
nav .pages a { margin: 0 6px; } nav .pages a[aria-current] { color: inherit; text-decoration: none; font-weight: 600; }
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
table.course th, table.course td, .page th, .page td { text-align: left; vertical-align: top; }
table.course { font-size: 14px; width: 100%; } table.course td.time { white-space: nowrap; }
table.course small, .muted { color: #57606a; }
.anchor-link { display: none; }
math { font-family: "STIX Two Math", "Latin Modern Math", "Cambria Math", "DejaVu Math TeX Gyre", math;
       font-size: 1.08em; }
math[display="block"] { display: block math; margin: 0.6em 0; padding: 2px 0; overflow-x: auto; overflow-y: hidden; }
details { border: 1px solid #d0d7de; border-radius: 6px; padding: 4px 10px; margin: 8px 0; background: #fbfcfd; }
details > summary { cursor: pointer; font-weight: 600; color: #1a5fb4; }
details[open] > summary { margin-bottom: 6px; border-bottom: 1px solid #e1e4e8; padding-bottom: 4px; }
"""

HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)

# TeX between dollars. Display math is $$...$$. Inline math is a well-formed pair only: the
# opening $ is not followed by a space and the closing $ is not preceded by one nor followed by
# a digit, so dollar amounts in prose ("between $5 and $10") stay text; a backtick ends the try (a
# code span after a price is code, not the end of a formula). Escaped \$ never counts.
DISPLAY_TEX = r"(?<!\\)\$\$(?P<math_block_tex>.+?)(?<!\\)\$\$"
INLINE_TEX = r"(?<![$\\])\$(?![\s$])(?P<math_inline_tex>(?:\\.|[^$\\`])+?)(?<!\s)\$(?![\d$])"
_TEX = re.compile(f"(?s:{DISPLAY_TEX}|{INLINE_TEX})")
# Elements whose text is never math: code, preformatted text, and math already converted.
_VERBATIM = {"pre", "code", "kbd", "samp", "script", "style", "textarea", "math", "svg"}
# Where the converter's MathML differs from what TeX draws: \setminus comes out as U+29F5, a
# character few fonts carry, as an identifier (TeX: the binary operator U+2216); a named operator
# (\operatorname{mean}, \max) gets an operator's thick spaces on both sides (TeX: a thin space
# after it, none before beyond the neighbour's own).
_MATHML_FIXES = (
    (re.compile(r"<mi>&#x029F5;</mi>"), "<mo>&#x02216;</mo>"),
    (re.compile(r"<mo>([A-Za-z]{2,})</mo>"), r'<mo lspace="0" rspace="0.167em">\1</mo>'),
)
_TAG = re.compile(r"<!--.*?-->|<[A-Za-z/!][^>\"']*(?:(?:\"[^\"]*\"|'[^']*')[^>\"']*)*>", re.S)


def tex_to_mathml(tex: str, display: bool = False) -> str:
    """MathML for one TeX formula (``display``: a block of its own, else inline in the text), its
    TeX kept as an annotation; raises ValueError naming the formula where it cannot be converted."""
    from latex2mathml.converter import convert

    source = tex.strip()
    if not source:
        raise ValueError("tex: an empty formula")
    try:
        out = convert(source, display="block" if display else "inline")
    except Exception as exc:  # the converter raises its own exception types for unknown commands
        raise ValueError(f"tex: cannot convert {tex!r} to MathML ({type(exc).__name__}: {exc})") from exc
    if "<merror" in out:
        raise ValueError(f"tex: {tex!r} converts to a MathML error: {out}")
    unknown = re.findall(r">[^<]*?(\\[A-Za-z]+)", out)  # the converter spells an unknown command as text
    if unknown:
        raise ValueError(f"tex: {tex!r} uses {sorted(set(unknown))}, which the converter does not know")
    for pattern, replacement in _MATHML_FIXES:
        out = pattern.sub(replacement, out)
    head, _, rest = out.partition(">")
    inner = rest.rsplit("</math>", 1)[0]
    # the TeX rides along as an annotation: not drawn, but copied with the formula and read by
    # assistive tools
    return (f"{head}><semantics><mrow>{inner}</mrow>"
            f"<annotation encoding=\"application/x-tex\">{html.escape(source, quote=False)}</annotation>"
            f"</semantics></math>")


def math_in_text(text: str) -> str:
    """``text`` (HTML text, no tags) with each $$display$$ and well-formed $inline$ formula as MathML."""
    def one(m):
        if m.group("math_block_tex") is not None:
            return tex_to_mathml(html.unescape(m.group("math_block_tex")), display=True)
        return tex_to_mathml(html.unescape(m.group("math_inline_tex")))

    return _TEX.sub(one, text) if "$" in text else text


def math_in_html(fragment: str) -> str:
    """``fragment`` (HTML) with the TeX in its text converted to MathML; text inside <pre>, <code>
    and the like, attributes and comments are left as they are."""
    parts: list[str] = []
    open_verbatim: dict[str, int] = {}
    pos = 0
    for m in _TAG.finditer(fragment):
        text = fragment[pos:m.start()]
        parts.append(text if any(open_verbatim.values()) else math_in_text(text))
        tag = m.group(0)
        name = re.match(r"</?([A-Za-z][\w:-]*)", tag)
        if name and name.group(1).lower() in _VERBATIM and not tag.endswith("/>"):
            key = name.group(1).lower()
            open_verbatim[key] = max(0, open_verbatim.get(key, 0) + (-1 if tag.startswith("</") else 1))
        parts.append(tag)
        pos = m.end()
    tail = fragment[pos:]
    parts.append(tail if any(open_verbatim.values()) else math_in_text(tail))
    return "".join(parts)


def collapse_details(fragment: str) -> str:
    """``fragment`` with every <details> closed (its ``open`` attribute removed): a reveal stays
    hidden until the reader opens it."""
    def close(m):
        return re.sub(r"\s+open(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>\"']+))?(?=[\s/>])", "", m.group(0), flags=re.I)

    return re.sub(r"<details\b[^>]*>", close, fragment, flags=re.I)


def _markdown_parser(**renderer_options):
    """nbconvert's math-aware mistune Markdown, drawing math as MathML, with the stricter
    inline-dollar rule above."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath, MathInlineParser

    class Inline(MathInlineParser):
        SPECIFICATION = {**MathInlineParser.SPECIFICATION,
                         "block_math_tex": f"(?s:{DISPLAY_TEX})", "inline_math_tex": f"(?s:{INLINE_TEX})"}

    class Renderer(IPythonRenderer):
        def block_math(self, body: str) -> str:
            return tex_to_mathml(body, display=True)

        def inline_math(self, body: str) -> str:
            return tex_to_mathml(body)

        def latex_environment(self, name: str, body: str) -> str:
            return tex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)

    return MarkdownWithMath(renderer=Renderer(escape=False, **renderer_options), inline=Inline(hard_wrap=False))


def markdown_to_html(source: str) -> str:
    """HTML for a Markdown page or snippet, math as MathML."""
    return _markdown_parser().render(source)


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


def markdown_title(source: str, default: str) -> str:
    """The first heading of a Markdown page (inline marks removed), else ``default``."""
    m = HEADING.search(source)
    return re.sub(r"[*_`]", "", m.group(1)).strip() if m else default


def _exporter():
    from nbconvert import HTMLExporter
    from jinja2 import pass_context
    from pygments.formatters import HtmlFormatter

    class Exporter(HTMLExporter):
        @pass_context
        def markdown2html(self, context, source):
            # nbconvert's own filter, with math drawn as MathML instead of left for MathJax
            cell = context.get("cell", {})
            parser = _markdown_parser(attachments=cell.get("attachments", {}), embed_images=self.embed_images,
                                      anchor_link_text=self.anchor_link_text,
                                      exclude_anchor_links=self.exclude_anchor_links, **self.lexer_options)
            return parser.render(source)

    exporter = Exporter(template_name="basic")  # the cells only: no require.js, no MathJax
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


def _nav(prev: tuple[str, str] | None, nxt: tuple[str, str] | None,
         extra: list[tuple[str, str]] = (), here: str = "") -> str:
    left = (f'<a rel="prev" href="{prev[0]}">&larr; {html.escape(prev[1])}</a>' if prev else "<span></span>")
    right = (f'<a rel="next" href="{nxt[0]}">{html.escape(nxt[1])} &rarr;</a>' if nxt else "<span></span>")
    links = [("index.html", "Contents"), *extra]
    current = ' aria-current="page"'
    middle = "".join(f'<a href="{n}"{current if n == here else ""}>{html.escape(t)}</a>' for n, t in links)
    return f'{left}<span class="pages">{middle}</span>{right}'


def _two_digits(value, arg: str) -> str:
    text = str(value).strip()
    if not re.fullmatch(r"\d{1,2}", text):
        raise ValueError(f"{arg}: notebook {value!r} is not a two-digit notebook number")
    return text.zfill(2)


def read_outline(path: Path, numbers: list[str]) -> dict[str, dict]:
    """Each notebook's question and prerequisites (two-digit numbers) from the outline CSV at
    ``path`` (columns notebook, question, prerequisites), by notebook number; every number in
    ``numbers`` must have a row and every prerequisite must be one of ``numbers``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"outline: {path} is missing (the course outline: one row per notebook with "
                                f"columns notebook, question, prerequisites)")
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    need = {"notebook", "question", "prerequisites"}
    if not rows or not need <= set(rows[0]):
        raise ValueError(f"outline: {path} needs the columns {sorted(need)}, has {sorted(rows[0]) if rows else []}")
    outline = {}
    for row in rows:
        nb = _two_digits(row["notebook"], "outline")
        prereqs = [_two_digits(p, "outline") for p in (row["prerequisites"] or "").split()]
        unknown = [p for p in prereqs if p not in numbers]
        if unknown:
            raise ValueError(f"outline: {path}: notebook {nb}'s prerequisites {unknown} are not course notebooks")
        outline[nb] = {"question": (row["question"] or "").strip(), "prerequisites": prereqs}
    missing = [n for n in numbers if n not in outline or not outline[n]["question"]]
    if missing:
        raise ValueError(f"outline: {path} has no question for notebooks {missing}")
    return outline


def _read_times(times, numbers: list[str]) -> dict[str, dict]:
    records = times.to_dict("records") if hasattr(times, "to_dict") else list(times)
    need = ("notebook", "core", "optional", "total")
    by_nb = {}
    for rec in records:
        if not all(k in rec for k in need):
            raise ValueError(f"times: each row needs {list(need)}, got {sorted(rec)}")
        by_nb[_two_digits(rec["notebook"], "times")] = {k: int(rec[k]) for k in need[1:]}
    missing = [n for n in numbers if n not in by_nb]
    if missing:
        raise ValueError(f"times: no time for notebooks {missing}")
    return by_nb


def default_times(notebooks: Path):
    """Each notebook's minutes by the course's timing rule (labkit.course.timing.course_times)."""
    from labkit.course.timing import course_times

    return course_times(notebooks)


def default_pages() -> list[tuple[str, str, str]]:
    """The workshop plans as pages: (file name, title, Markdown) from labkit.course.timing."""
    from labkit.course.timing import PLAN_NAMES, plan_markdown

    pages = []
    for name in PLAN_NAMES:
        source = plan_markdown(name)
        pages.append((f"plan-{name}.html", markdown_title(source, f"Plan: {name}"), source))
    return pages


def guide_pages(notebooks: Path) -> list[tuple[str, str, str]]:
    """Every ``notebooks``/guide/*.md as a page: (file name, title, Markdown)."""
    pages = []
    for md in sorted((notebooks / "guide").glob("*.md")):
        source = md.read_text(encoding="utf-8")
        pages.append((f"guide-{md.stem}.html", markdown_title(source, md.stem.replace("_", " ")), source))
    return pages


def _check_pages(pages, taken: set[str]) -> list[tuple[str, str, str]]:
    checked = []
    for item in pages:
        if not (isinstance(item, tuple) and len(item) == 3 and all(isinstance(x, str) for x in item)):
            raise TypeError(f"pages: each page is (file name, title, markdown) strings, got {item!r}")
        name, title, source = item
        if not re.fullmatch(r"[\w\-]+\.html", name) or name in taken:
            raise ValueError(f"pages: {name!r} is not a free page name (letters, digits, - or _, then .html)")
        taken.add(name)
        checked.append((name, title.strip() or name, source))
    return checked


def _relink(body: str, targets: dict[str, str]) -> str:
    """Links to a notebook or a guide file point at its page (``targets``: file name -> page)."""
    def one(m):
        page = targets.get(m.group(2))
        return f'href="{page}{m.group(3) or ""}"' if page else m.group(0)

    return re.sub(r'href="((?:\.\./|\./|notebooks/|guide/)*)([\w\-]+\.(?:ipynb|md))(#[^"]*)?"', one, body)


def _minutes(t: dict) -> str:
    core, optional = t["core"], t["optional"]
    detail = f"core {core} + optional {optional}" if optional else "all core"
    return f"about {t['total']} min<br><small>{detail}</small>"


def _index_body(rows, outline, times, extra) -> str:
    page_of = {num: name for num, name, _ in rows}
    lines = []
    for num, name, title in rows:
        info, t = outline[num], times[num]
        question = markdown_to_html(info["question"]).strip()
        question = re.sub(r"^<p>(.*)</p>$", r"\1", question, flags=re.S)
        before = ", ".join(f'<a class="prereq" href="{page_of[p]}">{p}</a>' for p in info["prerequisites"])
        lines.append(f'<tr><td><a class="nb" href="{name}">{html.escape(title)}</a>'
                     f'<br><span class="question">{question}</span></td>'
                     f'<td class="time">{_minutes(t)}</td><td class="prereqs">{before or "none"}</td></tr>')
    core = sum(times[n]["core"] for n, _, _ in rows)
    total = sum(times[n]["total"] for n, _, _ in rows)
    links = "".join(f'<li><a href="{n}">{html.escape(t)}</a></li>' for n, t in extra)
    more = f"<h2>Plans and guides</h2>\n<ul>{links}</ul>\n" if extra else ""
    return (f"<h1>Credit Assignment Lab</h1>\n<p>The course's notebooks with their stored outputs "
            f"(charts as pictures of their first state). To move the sliders, open the notebooks in "
            f"JupyterLab (<code>make lab</code>).</p>\n{more}<h2>Notebooks</h2>\n"
            f"<p class=\"muted\">The whole course: about {core} min on the core path, {total} min with every "
            f"optional deep dive.</p>\n"
            f"<table class=\"course\">\n<thead><tr><th>Notebook and its question</th><th>Time</th>"
            f"<th>Prerequisites</th></tr></thead>\n<tbody>\n" + "\n".join(lines) + "\n</tbody>\n</table>")


def build(out: Path = OUT, notebooks: Path = NOTEBOOKS, *, outline: Path = OUTLINE, times=None,
          pages: list[tuple[str, str, str]] | None = None) -> list[Path]:
    """Write ``out``/index.html, one ``NN_name.html`` per course notebook in ``notebooks``, and one
    page per plan and guide; returns the pages written: index, notebooks in order, then the others.

    ``outline``: the CSV with each notebook's question and prerequisites. ``times``: a table (a
    DataFrame) with columns notebook, core, optional, total (minutes), by default
    labkit.course.timing.course_times(notebooks). ``pages``: extra pages as (file name, title,
    Markdown), by default the workshop plans from labkit.course.timing.plan_markdown; every
    ``notebooks``/guide/*.md is a page too."""
    paths = course_notebooks(notebooks)
    if not paths:
        raise ValueError(f"notebooks: no NN_name.ipynb files in {notebooks}")
    numbers = [p.name[:2] for p in paths]
    course_outline = read_outline(outline, numbers)
    course_times = _read_times(default_times(notebooks) if times is None else times, numbers)
    names = [p.stem + ".html" for p in paths]
    extra = _check_pages(default_pages() if pages is None else pages, {"index.html", *names})
    extra += _check_pages(guide_pages(notebooks), {"index.html", *names, *(n for n, _, _ in extra)})
    nav_extra = [(n, t) for n, t, _ in extra]

    out.mkdir(parents=True, exist_ok=True)
    exporter, pyg_css = _exporter()
    css = CSS + pyg_css
    nbs = [nbformat.read(p, as_version=4) for p in paths]
    titled = [(name, notebook_title(nb)) for name, nb in zip(names, nbs)]
    targets = {p.name: n for p, n in zip(paths, names)}
    targets.update({Path(n[len("guide-"):]).stem + ".md": n for n, _, _ in extra if n.startswith("guide-")})
    written = []
    for i, (path, nb, (name, title)) in enumerate(zip(paths, nbs, titled)):
        for cell in nb.cells:  # HTML outputs carry their TeX as text: convert it before export
            for output in cell.get("outputs", []):
                if "text/html" in output.get("data", {}):
                    source = output["data"]["text/html"]
                    source = "".join(source) if isinstance(source, list) else source
                    try:
                        output["data"]["text/html"] = math_in_html(source)
                    except ValueError as exc:
                        raise ValueError(f"{path.name}: {exc}") from exc
        try:
            body, _ = exporter.from_notebook_node(nb)
        except ValueError as exc:
            raise ValueError(f"{path.name}: {exc}") from exc
        body = collapse_details(_relink(body, targets))
        nav = _nav(titled[i - 1] if i else None, titled[i + 1] if i + 1 < len(titled) else None, nav_extra)
        (out / name).write_text(_page(title, body, nav, css), encoding="utf-8")
        written.append(out / name)
    for name, title, source in extra:
        try:
            body = markdown_to_html(source)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from exc
        body = f'<article class="page">\n{collapse_details(_relink(body, targets))}\n</article>'
        (out / name).write_text(_page(title, body, _nav(None, None, nav_extra, here=name), css), encoding="utf-8")
    rows = [(num, name, title) for num, (name, title) in zip(numbers, titled)]
    index = _index_body(rows, course_outline, course_times, nav_extra)
    (out / "index.html").write_text(
        _page("Credit Assignment Lab", index, _nav(None, titled[0], nav_extra, here="index.html"), css),
        encoding="utf-8")
    return [out / "index.html", *written, *(out / n for n, _, _ in extra)]


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--notebooks", type=Path, default=NOTEBOOKS)
    ap.add_argument("--outline", type=Path, default=OUTLINE)
    args = ap.parse_args(argv)
    try:
        pages = build(args.out, args.notebooks, outline=args.outline)
    except (FileNotFoundError, ValueError) as exc:  # a missing or bad input: say which, no traceback
        sys.exit(f"render_site: {exc}")
    size = sum(p.stat().st_size for p in pages)
    print(f"{len(pages)} pages, {size / 1e6:.1f} MB in {args.out}/ (open {args.out / 'index.html'})")


if __name__ == "__main__":
    main(sys.argv[1:])
