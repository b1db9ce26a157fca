"""The page: a summary header, the findings in rank order, each with its plot, culprits,
victims, evidence and sites; on a healthy trace "no findings" and the busiest resources' plots.

Every string from the trace (task and resource names, summaries, file names, source lines) goes
through ``escape``; the page loads nothing (a Content-Security-Policy forbids it to, and it has
no script), so it can be mailed or attached to a ticket as one file.
"""

from __future__ import annotations

import json
from html import escape

from gigi.diagnosis import Diagnosis, Finding
from gigi.diagnosis._render import task_names, victim_count
from gigi.errors import GigiError
from gigi.report import _data
from gigi.report._config import ReportConfig
from gigi.report._source import SourceTree
from gigi.report._svg import MARK_COLORS, Mark, Series, plot

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #222; margin: 0 auto; max-width: 1000px;
  padding: 1em 1.5em 3em; }
h1 { font-size: 1.5em; margin: .2em 0; } h2 { font-size: 1.2em; margin: 1.6em 0 .3em; }
h3 { font-size: 1em; margin: 1em 0 .3em; }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; margin: 0; }
dl.summary dt { color: #666; } dl.summary dd { margin: 0; }
.note { background: #fff4d6; border-left: 4px solid #e0a100; padding: .4em .8em; }
.no-findings { background: #e8f6ea; border-left: 4px solid #2a9d3a; padding: .6em .8em;
  font-size: 1.1em; }
section.finding, section.resource { border-top: 1px solid #ddd; margin-top: 1.5em; }
.mode { font-weight: 600; color: #b22; } .score { color: #666; font-weight: normal; }
table { border-collapse: collapse; margin: .3em 0; }
td, th { text-align: left; padding: .15em .8em .15em 0; vertical-align: top; }
th { color: #666; font-weight: normal; }
table.toc td { padding-right: 1.2em; }
.plot { max-width: 100%; height: auto; display: block; margin: .4em 0; }
.plot text { font: 11px system-ui, sans-serif; fill: #444; } .plot .panel-name { font-weight: 600; }
.legend span.swatch { display: inline-block; width: .9em; height: .9em; vertical-align: -.1em;
  margin-right: .3em; opacity: .5; }
.legend { margin: 0 0 .6em; color: #444; }
pre.code { background: #f6f6f6; padding: .4em .6em; margin: .2em 0 .8em; overflow-x: auto;
  font: 12px/1.4 ui-monospace, monospace; }
pre.code .here { background: #ffe39a; display: inline-block; min-width: 100%; }
.missing { color: #777; font-style: italic; }
code { font: 12px ui-monospace, monospace; }
.who { display: flex; gap: 3em; } .who ul { margin: 0; padding-left: 1.2em; }
.id { color: #888; }
footer { margin-top: 3em; color: #777; font-size: .9em; }
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _seconds(ns: float) -> str:
    return f"{ns / 1e9:.3f} s"


def _task(names: dict[int, str], task: int) -> str:
    name = names.get(task)
    return f'{_e(name)} <span class="id">({task})</span>' if name else f"task {task}"


def _tasks(
    names: dict[int, str], tasks: list[int], most: int, css: str, total: int | None = None
) -> str:
    if not tasks:
        return '<span class="missing">none</span>'
    items = "".join(f'<li class="{css}">{_task(names, t)}</li>' for t in tasks[:most])
    total = max(total or 0, len(tasks))
    more = f"<li>and {total - most} more</li>" if total > most else ""
    return f"<ul>{items}{more}</ul>"


def _evidence(evidence: dict) -> str:
    rows = []
    for key, value in evidence.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and key.endswith("_ns"):
            text = f"{value:,.0f} ns ({_seconds(value)})"
        else:
            text = value if isinstance(value, str) else json.dumps(value)
        rows.append(f"<tr><th>{_e(key)}</th><td>{_e(text)}</td></tr>")
    return f'<table class="evidence">{"".join(rows)}</table>'


def _plot(resource: str, timeline: _data.Timeline | None, capacity, marks: list[Mark]) -> str:
    if timeline is None:
        return '<p class="missing">no events of this resource to plot</p>'
    series = [Series(name, label, timeline.values[name]) for name, label in _data.SERIES.items()]
    return plot(resource, timeline.edges, series, marks, capacity=capacity)


def _marks(
    con, f: Finding, names: dict[int, str], config: ReportConfig, span: int
) -> tuple[list[Mark], str]:
    """The culprits' holds of the finding's resource, and the legend saying whose they are."""
    culprits = f.culprit_tasks[: config.culprits_marked]
    if not culprits:
        return [], '<p class="legend">no culprit task: nothing to mark</p>'
    color = {t: i for i, t in enumerate(culprits)}
    gap = span // max(config.windows, 1)  # holds closer than a window read as one stretch
    marks, counted = [], {}
    for task, t0, t1, holds in _data.culprit_holds(con, f.resource, culprits, gap):
        counted[task] = counted.get(task, 0) + holds
        label = f"{names.get(task, f'task {task}')}: {holds} hold(s), {_seconds(t1 - t0)}"
        marks.append(Mark(task, label, int(t0), int(t1), color[task]))
    legend = []
    for t in culprits:
        swatch = MARK_COLORS[color[t] % len(MARK_COLORS)]
        held = (
            f"{counted[t]} hold(s) of {_e(f.resource)} marked"
            if t in counted
            else f"held no {_e(f.resource)}: nothing to mark"
        )
        legend.append(
            f'<span class="culprit" data-task="{t}"><span class="swatch" '
            f'style="background:{swatch}"></span>{_task(names, t)}: {held}</span>'
        )
    return marks, f'<p class="legend">culprits: {"; ".join(legend)}</p>'


def _sites(f: Finding, source: SourceTree) -> str:
    if not f.sites:
        return '<p class="missing">no sites known for this resource</p>'
    parts = []
    for s in f.sites:
        ex = source.excerpt(s.get("file"), s.get("line"))
        where = f"{_e(s.get('file'))}:{_e(s.get('line'))}"
        fn = f" in <code>{_e(s['function'])}</code>" if s.get("function") else ""
        parts.append(
            f'<div class="site" data-role="{_e(s.get("role"))}" data-kind="{_e(s.get("kind"))}">'
            f"<div>{_e(s.get('role'))} {_e(s.get('kind'))} at <code>{where}</code>{fn}</div>"
        )
        if ex.missing:
            parts.append(f'<p class="missing source-missing">{_e(ex.missing)}</p>')
        else:
            width = len(str(ex.lines[-1][0]))
            lines = []
            for n, text in ex.lines:
                line = f"{n:>{width}}  {_e(text)}"
                lines.append(f'<span class="here">{line}</span>' if n == ex.line else line)
            parts.append('<pre class="code">' + "\n".join(lines) + "</pre>")
        parts.append("</div>")
    return "".join(parts)


def _executing(ex: dict | None) -> str:
    if ex is None:
        return ""
    items = []
    for e in ex.get("events", []):
        fns = "".join(
            f"<li>{100 * fn['share']:.1f}% <code>{_e(fn['function'])}</code></li>"
            for fn in e["functions"]
        )
        items.append(
            f"<p>perf {_e(e['event'] or 'samples')}: {e['samples']:,} samples</p><ul>{fns}</ul>"
        )
    body = "".join(items) or '<p class="missing">no perf sample of the culprits</p>'
    return f"<h3>What the culprits executed</h3>{body}"


def _finding(d: Diagnosis, f: Finding, ctx: dict) -> str:
    con, config = d.con, ctx["config"]
    names = task_names(con, f.culprit_tasks[:10] + f.victim_tasks[:10])
    marks, legend = _marks(con, f, names, config, ctx["span"])
    victims = _tasks(names, f.victim_tasks, 5, "victim", victim_count(f))
    capacity = ctx["facts"].get(f.resource, (None,))[0]
    cause = (
        f' <a href="#finding-{f.caused_by}">caused by #{f.caused_by}</a>'
        if f.caused_by is not None
        else ""
    )
    return f"""
<section class="finding" id="finding-{f.rank}" data-rank="{f.rank}"
  data-resource="{_e(f.resource)}" data-failure-mode="{_e(f.failure_mode)}">
<h2>#{f.rank} <span class="mode">{_e(f.failure_mode)}</span> on
  <span class="resource">{_e(f.resource)}</span>
  <span class="score">score {f.score:.2f}</span>{cause}</h2>
<p class="summary">{_e(f.summary)}</p>
{_plot(f.resource, ctx["timelines"].get(f.resource), capacity, marks)}
{legend}
<div class="who">
<div class="culprits"><h3>Culprits</h3>{_tasks(names, f.culprit_tasks, 5, "culprit")}
{_groups(f.culprit_groups)}</div>
<div class="victims"><h3>Victims</h3>{victims}</div>
</div>
<h3>Evidence</h3>
{_evidence(f.evidence)}
<h3>Sites</h3>
{_sites(f, ctx["source"])}
{_executing(f.executing)}
</section>"""


def _groups(groups: list[dict]) -> str:
    """Blame summed by normalized name and by lineage (gigi.diagnosis's culprit groups)."""
    if not groups:
        return ""
    rows = "".join(
        f"<tr><td>{_e(g['by'])}</td><td>{_e(g['name'])}</td><td>{g['tasks']:,}</td>"
        f"<td>{100 * g['blame_share']:.0f}%</td></tr>"
        for g in groups
    )
    return (
        '<table class="groups"><tr><th>grouped by</th><th>group</th><th>tasks</th>'
        f"<th>share of the blame</th></tr>{rows}</table>"
    )


def _unexplained(d: Diagnosis, u, ctx: dict) -> str:
    """A resource with significant waits that no detector accused, and each one's verdict."""
    capacity = ctx["facts"].get(u.resource, (None,))[0]
    names = task_names(d.con, u.culprit_tasks[:5])
    verdicts = "".join(f"<li>{_e(v.detector)}: {_e(v.why_not)}</li>" for v in u.verdicts)
    return (
        f'<section class="unexplained" data-resource="{_e(u.resource)}">'
        f"<h2>Unexplained waits on {_e(u.resource)}</h2>"
        f'<p class="summary">{_e(u.summary)}</p>'
        f"{_plot(u.resource, ctx['timelines'].get(u.resource), capacity, [])}"
        f"<h3>Most blamed</h3>{_tasks(names, u.culprit_tasks, 5, 'culprit')}"
        f"{_groups(u.culprit_groups)}<h3>Why no detector fired</h3><ul>{verdicts}</ul>"
        "</section>"
    )


def _quiet(d: Diagnosis, resource: str) -> str:
    """Under a quiet resource's plot: its figures and why no detector accused it."""
    from gigi.diagnosis._explain import why_quiet

    figure = next((f for f in d.waited if f["resource"] == resource), None)
    if figure is None or not figure["waits"]:
        return ""
    first, *rest = why_quiet(figure, d.verdicts)
    items = "".join(f"<li>{_e(line.strip())}</li>" for line in rest)
    return f'<p class="figures">{_e(first)}</p><ul class="why-not">{items}</ul>'


def _resource(d: Diagnosis, resource: str, ctx: dict) -> str:
    capacity = ctx["facts"].get(resource, (None,))[0]
    plotted = _plot(resource, ctx["timelines"].get(resource), capacity, [])
    return (
        f'<section class="resource" data-resource="{_e(resource)}">'
        f"<h2>{_e(resource)}</h2>{plotted}{_quiet(d, resource)}</section>"
    )


def _header(d: Diagnosis, start: int, end: int) -> str:
    m = d.manifest
    rows = [
        ("trace", _e(d.trace)),
        ("duration", _seconds(end - start)),
        ("events", f"{d.events:,}"),
        ("tasks", f"{m.tasks:,}"),
        ("resources", f"{m.resources:,}"),
        ("dropped", f"{d.dropped:,} events; {m.bytes_lost:,} bytes lost"),
        ("findings", str(len(d.findings))),
        ("unexplained", str(len(d.unexplained))),
    ]
    dl = "".join(f'<dt>{k}</dt><dd class="{k}">{v}</dd>' for k, v in rows)
    note = (
        '<p class="note">The writers lost events: the figures undercount.</p>'
        if d.dropped or m.bytes_lost
        else ""
    )
    return f'<header><h1>gigi report</h1><dl class="summary">{dl}</dl>{note}</header>'


def _toc(d: Diagnosis) -> str:
    rows = "".join(
        f'<tr><td><a href="#finding-{f.rank}">#{f.rank}</a></td><td>{_e(f.failure_mode)}</td>'
        f"<td>{_e(f.resource)}</td><td>{f.score:.2f}</td><td>{_e(f.summary)}</td></tr>"
        for f in d.findings
    )
    return (
        '<table class="toc"><tr><th>rank</th><th>failure mode</th><th>resource</th>'
        f"<th>score</th><th>summary</th></tr>{rows}</table>"
    )


def render(d: Diagnosis, config: ReportConfig | None = None) -> str:
    """The page of a diagnosis, as one string of HTML."""
    if d.con is None or d.manifest is None:
        raise GigiError("the report reads the trace through DuckDB: diagnose a store or trace")
    config = config or ReportConfig()
    con = d.con
    start, end = _data.time_range(con)
    ctx = {
        "config": config,
        "span": max(end - start, 1),
        "timelines": _data.timelines(con, config.windows),
        "facts": _data.resource_facts(con),
        "source": SourceTree(config.source, config.context_lines),
    }
    unexplained = "".join(_unexplained(d, u, ctx) for u in d.unexplained)
    if d.findings:
        body = "<h2>Findings</h2>" + _toc(d) + "".join(_finding(d, f, ctx) for f in d.findings)
        body += unexplained
    elif unexplained:
        body = unexplained
    else:
        body = (
            '<p class="no-findings">No findings: no detector accused a resource. The most '
            "waited-for resources follow, each with why no detector fired.</p>"
            + "".join(_resource(d, r, ctx) for r in _data.busiest(con, config.healthy_resources))
        )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>gigi report: {_e(d.trace)}</title>
<style>{STYLE}</style>
</head>
<body>
{_header(d, start, end)}
<main>{body}</main>
<footer>Written by gigi-query report. Plots: time-weighted means over {config.windows} windows;
shaded: the culprits' holds of the resource.</footer>
</body>
</html>
"""
