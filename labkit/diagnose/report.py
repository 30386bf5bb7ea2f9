"""The diagnosis as a document: one list of blocks rendered to Markdown and to self-contained HTML.

A block is a heading, a paragraph, a bulleted list, a table (a DataFrame) or a chart (an altair
chart, rendered to PNG offline by ``labkit.viz.chart_png``). The HTML embeds each PNG as a
``data:`` URI and carries its own CSS: it opens from disk with no network. The Markdown links
PNG files written next to it (``report_files/``).
"""
from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from labkit import viz
from labkit.survey.decision_tree import QUESTIONS, decision_tree_graph
from labkit.core.stats import constant_groups
from labkit.io.text_positions import display_text
from labkit.diagnose.compare import rms_scaled
from labkit.diagnose.training_steps import step_charts

__all__ = ["Block", "blocks", "render_markdown", "render_html", "HEATMAP_POSITIONS", "HEATMAP_ROWS"]

#: Positions drawn per trajectory in the credit heatmaps (the first ones: a 256-token row wraps
#: over seven lines per estimator otherwise).
HEATMAP_POSITIONS = 80
#: Trajectories drawn in each heatmap: sampled at random, and the most disputed.
HEATMAP_ROWS = 3
#: Rows of the per-step table at most (a run of a thousand steps is read from its charts).
STEP_TABLE_ROWS = 12


@dataclass
class Block:
    """One piece of the report: ``kind`` is "h1", "h2", "p", "list", "table" or "chart"; ``body``
    is text, a list of strings, a DataFrame, or (for a chart) the altair chart; ``name`` names a
    chart's PNG file."""
    kind: str
    body: Any
    name: str = ""


def _fmt(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "n/a"
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:.{digits}g}"


def _hist_df(hist, label: str) -> pd.DataFrame:
    rows = hist.rows()
    return pd.DataFrame({label: [r[0] for r in rows], "trajectories": [r[1] for r in rows]})


def blocks(d) -> list[Block]:
    """The report of a :class:`~labkit.diagnose.Diagnosis` ``d`` as blocks, in reading order."""
    L, R, G, P, S = d.lengths, d.rewards, d.groups, d.positions, d.stochasticity
    rec = d.recommendation
    out = [Block("h1", f"Rollout diagnosis: {d.source}"),
           Block("p", f"{d.n_trajectories:,} trajectories, padded to {d.horizon:,} positions. "
                      f"Recommended method class: **{rec.method_class}** ({rec.regime} regime; "
                      f"candidates: {', '.join(rec.candidates)}).")]
    out += _flag_blocks(d)
    if d.source_notes:
        out.append(Block("h2", "How the data was read"))
        out.append(Block("list", [f"groups: by {d.grouping}"] + list(d.source_notes)))

    u = d.unit
    out.append(Block("h2", "Trajectory lengths"))
    rows = [(f"generated {u}s", L.generated_min, L.generated_median, L.generated_max),
            (f"episode {u}s (generated + tool output)", L.episode_min, L.episode_median, L.episode_max)]
    if L.turns_hist is not None:
        rows.append(("turns", L.turns_min, L.turns_median, L.turns_max))
    out.append(Block("table", pd.DataFrame(
        [(n, _fmt(a), _fmt(b), _fmt(c)) for n, a, b, c in rows], columns=["length in", "min", "median", "max"])))
    out.append(Block("chart", viz.bar_chart(_hist_df(L.generated_hist, f"generated {u}s"), f"generated {u}s",
                                            "trajectories", title=f"Generated {u}s per trajectory"),
                     "lengths"))
    if L.turns_hist is not None:
        out.append(Block("chart", viz.bar_chart(_hist_df(L.turns_hist, "turns"), "turns", "trajectories",
                                                title="Turns per trajectory"), "turns"))

    out.append(Block("h2", "Rewards"))
    out.append(Block("list", [
        f"trajectories with a non-zero reward: {R.share_nonzero:.1%}",
        f"trajectories with an intermediate reward (before their last generated {u}): "
        f"{R.share_intermediate:.1%} -> reward density read as "
        f"**{'per step' if R.intermediate else 'outcome only'}**",
        f"total reward per trajectory: mean {_fmt(R.total_mean)}, std {_fmt(R.total_std)}, "
        f"min {_fmt(R.total_min)}, max {_fmt(R.total_max)}, {R.n_distinct:,} distinct values"]))
    out.append(Block("chart", viz.bar_chart(_hist_df(R.hist, "total reward"), "total reward", "trajectories",
                                            title="Total reward per trajectory"), "rewards"))

    out.append(Block("h2", "Groups and positions"))
    zero = (f"{G.n_zero_variance:,} of {G.n_groups - G.n_singletons:,} groups with two or more members "
            f"({_pct(G.share_zero_variance)}) have all-equal rewards: GRPO, RLOO and Dr. GRPO give their "
            f"{G.share_rows_zero_variance:.1%} of trajectories no gradient at all")
    out.append(Block("list", [
        f"groups: {G.n_groups:,}, by {d.grouping}; size min / median / max {G.size_min:,} / {_fmt(G.size_median)} / "
        f"{G.size_max:,}; singletons {G.n_singletons:,}",
        zero,
        f"positions: {P.generated:,} generated, {P.environment:,} tool / environment output, "
        f"{P.padding:,} padding; tool-output share of non-padding positions **{P.tool_share:.1%}**",
        "data carries: " + (", ".join(k for k, v in d.features.items() if v) or "nothing beyond tokens and rewards")]))

    out += _step_blocks(d)
    if d.credit_check is not None:
        out.append(Block("h2", "The framework's own credit"))
        out.append(Block("p", "The advantages the trainer logged, recomputed by labkit under the framework's default "
                              "and under each common misconfiguration (labkit.diagnose.framework_credit)."))
        out.append(Block("list", d.credit_check.lines()))

    out.append(Block("h2", "Environment stochasticity"))
    out.append(Block("p", S.summary() + (
        "." if S.measurable else ". Nothing repeats, so the data cannot tell.")))

    out.append(Block("h2", "Decision tree"))
    out.append(Block("p", "Notebook 00's tree (labkit.survey.decision_tree) walked from the numbers above. "
                          "Answers marked *given* are arguments, not measurements."))
    out.append(Block("table", pd.DataFrame([(a.question, a.answer, a.evidence, a.source) for a in d.answers],
                                           columns=["question", "answer", "why", "source"])))
    asked = {a.question for a in d.answers}
    off = [f"{QUESTIONS[qid].text} {_answer(d.inputs, qid)} ({why})"
           for qid, (why, _) in d.evidence.items() if qid in QUESTIONS and QUESTIONS[qid].text not in asked]
    if off:
        out.append(Block("p", "Not asked on this path, but used by the caveats below:"))
        out.append(Block("list", off))
    out.append(Block("p", f"**{rec.method_class}** ({rec.leaf}). {rec.rationale}"))
    out.append(Block("list", [f"candidates: {', '.join(rec.candidates)}"] + [f"caveat: {c}" for c in d.caveats]
                     + [f"not stated: {u}" for u in d.unstated]))
    nodes, edges = decision_tree_graph(rec.leaf)
    out.append(Block("chart", viz.tree_chart(nodes, edges, title=f"Path taken: {rec.method_class}"), "tree"))

    out += _estimator_blocks(d)
    out.append(Block("p", "Timings (s): " + ", ".join(f"{k} {v:.2f}" for k, v in d.seconds.items())))
    return out


def _flag_blocks(d) -> list[Block]:
    """The red flags, first thing after the summary: what was measured, the threshold, why, what to try."""
    if not d.flags:
        return [Block("h2", "What to change"),
                Block("p", "No red flag: none of the measured quantities crossed its threshold "
                           "(labkit.diagnose.advice lists them).")]
    out = [Block("h2", "What to change"),
           Block("p", f"{len(d.flags)} red flag{'s' if len(d.flags) > 1 else ''}, most costly first. Each says what "
                      f"was measured, the threshold that raised it, why it matters and what to try.")]
    for f in d.flags:
        lines = [f"measured: {f.measured} (flagged at {f.threshold})", f"why: {f.reason}"]
        lines += [f"try: {a}" for a in f.actions]
        if f.estimators:
            lines.append("estimators that address it: " + ", ".join(f.estimators))
        out += [Block("p", f"**{f.title}**"), Block("list", lines)]
    return out


def _step_blocks(d) -> list[Block]:
    """The run per training step: drifts, a table and the charts."""
    st = d.steps
    if st is None:
        return []
    t = st.table
    out = [Block("h2", f"Over training steps ({len(t)} steps)"),
           Block("p", f"Each step's trajectories measured apart; drift compares the first and the last quarter of "
                      f"the steps (steps {st.windows[0][0]}-{st.windows[0][1]} against "
                      f"{st.windows[1][0]}-{st.windows[1][1]}).")]
    out.append(Block("list", [x.text for x in st.drifts] or ["no quantity drifted past its threshold"]))
    if len(t) > STEP_TABLE_ROWS:  # a long run: evenly spaced steps in the table, every step in the charts
        keep = sorted({int(round(i)) for i in np.linspace(0, len(t) - 1, STEP_TABLE_ROWS)})
        out.append(Block("p", f"{len(keep)} of the {len(t):,} steps, evenly spaced (the charts show every step):"))
        t = t.iloc[keep]
    out.append(Block("table", t.round(3)))
    for name, chart in step_charts(st).items():
        out.append(Block("chart", chart, name))
    return out


def _answer(inputs, qid: str) -> str:
    """The tree's answer to question ``qid`` for ``inputs``, as the branch label says it."""
    answer = QUESTIONS[qid].ask(inputs)
    return next((b.says.format(tokens=inputs.trajectory_tokens) for b in QUESTIONS[qid].branches
                 if b.answer == answer), answer)


def _pct(x: float) -> str:
    return "n/a" if x is None or np.isnan(x) else f"{x:.1%}"


def _estimator_blocks(d) -> list[Block]:
    c = d.comparison
    out = [Block("h2", "Estimators on this data (no ground truth)")]
    if c is None:
        return out + [Block("p", "Not run (estimators=[]).")]
    n = int(c.rows.numel())
    out.append(Block("p", f"Compared on {n:,} of {d.n_trajectories:,} trajectories (whole groups drawn at "
                          f"random, seed {d.seed})." if n < d.n_trajectories else
                          f"Compared on all {n:,} trajectories."))
    out.append(Block("list", [f"ran: {', '.join(c.ran) or 'none'}"]
                     + [f"skipped {k}: {v}" for k, v in c.skipped.items()]))
    if c.agreement is not None and len(c.ran) >= 2:
        out.append(Block("p", "Agreement: Spearman rank correlation of the estimators' credit over the "
                              "generated positions of the sample (1 = same ordering of positions)."))
        out.append(Block("table", c.agreement.round(3).reset_index(names="estimator")))
        long = c.agreement.round(2).stack().rename("rho").reset_index()
        long.columns = ["estimator", "against", "rho"]
        out.append(Block("chart", viz.heat_table(long, "estimator", "against", "rho",
                                                 title="Rank agreement of credit"), "agreement"))
    if c.disagreement is not None:
        out.append(Block("p", "Where the choice of estimator matters most: disagreement = mean over a "
                              "trajectory's generated positions of the spread (std) across estimators of "
                              "their credit, each estimator scaled by its RMS credit; sign_conflict = "
                              "share of positions pushed up by one estimator and down by another."))
        top = c.disagreement.head(10).drop(columns=["sample_row"]).round(3)
        out.append(Block("table", top))
    if c.credit:
        sub = c.sample_rollouts
        g = np.random.default_rng(d.seed)
        # drawn from groups whose rewards differ: a zero-variance group's heatmap is blank for
        # every group-relative estimator and says nothing about where they put credit
        live = np.flatnonzero(~constant_groups(sub.scores, sub.group_ids).numpy())
        pool = live if live.size else np.arange(sub.batch_size)
        picks = [("Credit on sampled trajectories", sorted(g.choice(pool, min(HEATMAP_ROWS, pool.size),
                                                                    replace=False).tolist()), "heatmap_sampled")]
        if c.disagreement is not None:
            picks.append(("Credit where estimators disagree most",
                          c.disagreement.sample_row.head(HEATMAP_ROWS).tolist(), "heatmap_disputed"))
        for title, rows, name in picks:
            out.append(Block("h2", title))
            out.append(Block("p", "Each estimator's credit divided by its RMS credit over the sample (the "
                                  f"scale the disagreement uses); the first {HEATMAP_POSITIONS} positions at most"
                                  + (", rows drawn from groups whose rewards differ." if name == "heatmap_sampled"
                                     and live.size else ".")))
            out.append(Block("chart", _heatmap(c, sub, rows), name))
    if c.not_supported:
        out.append(Block("h2", "Estimators not run"))
        out.append(Block("table", pd.DataFrame(sorted(c.not_supported.items()),
                                               columns=["estimator", "why (its spec: labkit.credit.spec)"])))
    return out


def _heatmap(c, sub, rows: list[int]):
    """compare_heatmaps of every estimator that ran, on ``rows`` of the sample, first positions."""
    mask = sub.mask[rows]
    used = int(mask.any(0).nonzero().max()) + 1 if bool(mask.any()) else 1
    W = min(used, HEATMAP_POSITIONS)
    tokens = display_text(sub, rows, W)
    labels = [f"row {int(c.rows[r])}" for r in rows]
    panels = {}
    for name, credit in c.credit.items():
        panels[name] = rms_scaled(credit, sub.mask)[rows, :W].numpy()
    return viz.compare_heatmaps(panels, tokens=tokens, mask=mask[:, :W].numpy(), row_labels=labels,
                                cell_size=18, show_text=tokens is not None, value_label="credit / RMS")


# --------------------------------------------------------------------------- renderers
def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _md_table(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(map(_md_cell, cols)) + " |", "|" + "---|" * len(cols)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_md_cell(_fmt(v) if isinstance(v, float) else v) for v in row) + " |")
    return "\n".join(lines)


def render_markdown(items: list[Block], pngs: dict[str, bytes] | None = None, image_dir: str = "report_files") -> str:
    """Markdown of ``items``; a chart becomes a link to ``image_dir/<name>.png`` when its PNG is
    in ``pngs``, else a note that the chart is in the HTML report."""
    parts = []
    for b in items:
        if b.kind == "h1":
            parts.append(f"# {b.body}")
        elif b.kind == "h2":
            parts.append(f"## {b.body}")
        elif b.kind == "p":
            parts.append(str(b.body))
        elif b.kind == "list":
            parts.append("\n".join(f"* {line}" for line in b.body))
        elif b.kind == "table":
            parts.append(_md_table(b.body))
        elif b.kind == "chart":
            parts.append(f"![{b.name}]({image_dir}/{b.name}.png)" if pngs and b.name in pngs
                         else f"*(chart {b.name}: see report.html)*")
    return "\n\n".join(parts) + "\n"


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:980px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}th{background:#f3f3f3}
img{max-width:100%;display:block;margin:.6em 0}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}"""


def _inline(text: str) -> str:
    """Escape, then turn Markdown's **bold** and *italic* into tags (the only markup used)."""
    out = html.escape(str(text))
    parts = out.split("**")
    out = "".join(f"<b>{p}</b>" if i % 2 else p for i, p in enumerate(parts))
    parts = out.split("*")
    return "".join(f"<i>{p}</i>" if i % 2 else p for i, p in enumerate(parts)) if len(parts) % 2 else out


def render_html(items: list[Block], pngs: dict[str, bytes] | None = None) -> str:
    """Self-contained HTML of ``items``: inline CSS, charts as ``data:image/png`` URIs, no script,
    and a Content-Security-Policy that forbids every request."""
    pngs = pngs or {}
    title = next((b.body for b in items if b.kind == "h1"), "Rollout diagnosis")
    body = []
    for b in items:
        if b.kind in ("h1", "h2"):
            body.append(f"<{b.kind}>{html.escape(str(b.body))}</{b.kind}>")
        elif b.kind == "p":
            body.append(f"<p>{_inline(b.body)}</p>")
        elif b.kind == "list":
            body.append("<ul>" + "".join(f"<li>{_inline(x)}</li>" for x in b.body) + "</ul>")
        elif b.kind == "table":
            body.append(b.body.to_html(index=False, border=0, escape=True,
                                       float_format=lambda v: _fmt(v)))
        elif b.kind == "chart":
            if b.name in pngs:
                data = base64.b64encode(pngs[b.name]).decode("ascii")
                body.append(f'<img alt="{html.escape(b.name)}" src="data:image/png;base64,{data}">')
            else:
                body.append(f"<p><i>(chart {html.escape(b.name)} not rendered)</i></p>")
    csp = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f"<title>{html.escape(str(title))}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def render_pngs(items: list[Block]) -> dict[str, bytes]:
    """PNG bytes of every chart block, by name (rendered offline by vl-convert)."""
    return {b.name: viz.chart_png(b.body) for b in items if b.kind == "chart"}
