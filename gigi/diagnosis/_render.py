"""The text report of a diagnosis, for a person at a terminal."""

from __future__ import annotations

from gigi.diagnosis._diagnose import Diagnosis

_BARS = " ▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """
    >>> sparkline([0, 1, 2, 4, 8])
    ' ▁▂▄█'
    """
    top = max(values, default=0)
    if top <= 0:
        return " " * len(values)
    return "".join(_BARS[min(8, round(8 * v / top))] if v > 0 else " " for v in values)


def task_names(con, tasks: list[int]) -> dict[int, str]:
    """task -> its name, for the tasks that have one."""
    if not tasks:
        return {}
    rows = con.execute(
        "SELECT task, name FROM tasks WHERE task IN (SELECT unnest(?::BIGINT[]))", [tasks]
    ).fetchall()
    return {t: n for t, n in rows if n}


def _tasks(names: dict[int, str], tasks: list[int], most: int) -> str:
    shown = [f"{names.get(t, 'task')} ({t})" for t in tasks[:most]]
    more = f" and {len(tasks) - most} more" if len(tasks) > most else ""
    return ", ".join(shown) + more if shown else "none"


_BASIS = {"victim_waits": "the victims' waits", "culprit_holds": "the culprits' holds"}


def _executing(ex: dict) -> list[str]:
    """What the culprits executed: per perf event, the top functions with their shares."""
    if not ex["events"]:
        return ["   executing: no perf sample of the culprits during the victims' waits or holds"]
    lines = []
    for e in ex["events"]:
        lines.append(
            f"   executing (perf {e['event'] or 'samples'}, {e['samples']:,} samples of "
            f"{len(e['threads'])} culprit thread(s) during {_BASIS[ex['basis']]}):"
        )
        for fn in e["functions"]:
            path = "".join(f" <- {c}" for c in fn["callers"])
            lines.append(f"     {100 * fn['share']:5.1f}%  {fn['function']}{path}")
    return lines


def render(d: Diagnosis) -> str:
    con = d.con
    lines = [f"trace {d.trace}: {d.events:,} events, {d.dropped:,} dropped"]
    if d.dropped:
        lines.append("  note: the writers lost events; figures undercount")
    if not d.findings:
        lines.append("no findings: nothing looks wrong in this trace")
    for f in d.findings:
        names = task_names(con, f.culprit_tasks[:5] + f.victim_tasks[:5])
        cause = f"  (caused by #{f.caused_by})" if f.caused_by else ""
        lines += [
            "",
            f"#{f.rank} {f.failure_mode} on {f.resource}  score {f.score:.2f}{cause}",
            f"   {f.summary}",
            f"   culprits: {_tasks(names, f.culprit_tasks, 3)}",
            f"   victims:  {_tasks(names, f.victim_tasks, 3)}",
            "   evidence: " + ", ".join(f"{k}={v}" for k, v in f.evidence.items()),
        ]
        for s in f.sites:
            lines.append(
                f"   site: {s['file']}:{s['line']} {s['function'] or ''} ({s['kind']}, {s['role']})"
            )
        if f.executing is not None:
            lines += _executing(f.executing)
    resources = list(dict.fromkeys(f.resource for f in d.findings))
    if resources:
        start, end = con.sql('SELECT start, "end" FROM trace_info').fetchall()[0]
        lines += ["", f"timeline ({(end - start) / 1e9:.2f} s, 50 windows):"]
        width = max(len(r) for r in resources)
        for r in resources:
            level = [
                v
                for (v,) in con.execute(
                    "SELECT outstanding FROM metrics_outstanding WHERE resource = ? "
                    "ORDER BY window_index",
                    [r],
                ).fetchall()
            ]
            waits = dict(
                con.execute(
                    """
                SELECT least(49, (ts - ?) * 50 // greatest(? - ?, 1))::BIGINT AS w, sum(dur)
                FROM waits WHERE resource = ? GROUP BY 1""",
                    [start, end, start, r],
                ).fetchall()
            )
            lines.append(f"  {r:<{width}}  outstanding |{sparkline(level)}|")
            lines.append(
                f"  {'':<{width}}  wait        |{sparkline([waits.get(w, 0) for w in range(50)])}|"
            )
    return "\n".join(lines)
