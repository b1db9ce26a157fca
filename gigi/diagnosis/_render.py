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


def victim_count(f) -> int:
    """How many tasks a finding slowed: its evidence's count where it has one (the list of
    victim tasks is capped at 100), else the list's length."""
    counted = f.evidence.get("victims") or f.evidence.get("waiting_tasks") or 0
    return max(int(counted), len(f.victim_tasks))


def _tasks(names: dict[int, str], tasks: list[int], most: int, total: int | None = None) -> str:
    shown = [f"{names.get(t, 'task')} ({t})" for t in tasks[:most]]
    total = max(total or 0, len(tasks))
    more = f" and {total - most} more" if total > most else ""
    return ", ".join(shown) + more if shown else "none"


def _groups(groups: list[dict]) -> list[str]:
    """The culprit groups, one line per kind (by name, by lineage)."""
    lines = []
    for by, label in (("name", "by name"), ("lineage", "by lineage")):
        shown = [
            f"{g['name']} x{g['tasks']} ({100 * g['blame_share']:.0f}%)"
            for g in groups
            if g["by"] == by
        ][:3]
        if shown:
            lines.append(f"   groups {label}: " + ", ".join(shown))
    return lines


def _quiet(d: Diagnosis) -> list[str]:
    """The most waited-for resources and why no detector accused them."""
    from gigi.diagnosis._explain import MOST, why_quiet

    if not d.waited:
        return ["   no task waited for any resource"]
    shown = [f for f in d.waited if f["waits"]][:MOST]
    if not shown:
        return ["   no task waited for any resource"]
    lines = ["most waited for, and why no detector fired:"]
    for figure in shown:
        lines += ["  " + line for line in why_quiet(figure, d.verdicts)]
    return lines


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
    if not d.findings and not d.unexplained:
        lines.append("no findings: no detector accused a resource")
        lines += _quiet(d)
    for f in d.findings:
        names = task_names(con, f.culprit_tasks[:5] + f.victim_tasks[:5])
        cause = f"  (caused by #{f.caused_by})" if f.caused_by else ""
        lines += [
            "",
            f"#{f.rank} {f.failure_mode} on {f.resource}  score {f.score:.2f}{cause}",
            f"   {f.summary}",
            f"   culprits: {_tasks(names, f.culprit_tasks, 3)}",
            *_groups(f.culprit_groups),
            f"   victims:  {_tasks(names, f.victim_tasks, 3, victim_count(f))}",
            "   evidence: " + ", ".join(f"{k}={v}" for k, v in f.evidence.items()),
        ]
        for s in f.sites:
            lines.append(
                f"   site: {s['file']}:{s['line']} {s['function'] or ''} ({s['kind']}, {s['role']})"
            )
        if f.executing is not None:
            lines += _executing(f.executing)
    for u in d.unexplained:
        names = task_names(con, u.culprit_tasks[:5])
        lines += [
            "",
            f"unexplained waits on {u.resource}",
            f"   {u.summary}",
            f"   most blamed: {_tasks(names, u.culprit_tasks, 3)}",
            *_groups(u.culprit_groups),
        ]
    resources = list(
        dict.fromkeys([f.resource for f in d.findings] + [u.resource for u in d.unexplained])
    )
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


def render_explain(doc: dict) -> str:
    """``diagnose --explain``: one resource's figures and every detector's verdict."""
    f = doc["figures"]
    lines = [
        f"{doc['resource']}: {f['waits']:,} waits, {f['wait_ns'] / 1e9:.2f} s waited, "
        f"{f['blamed_ns'] / 1e9:.2f} s behind other tasks "
        f"({f['blamed_ns'] / max(f['trace_ns'], 1):.3f} x the trace's length, weighing "
        f"{f['weighed_blame']:.3f}; significant from {f['min_wait']:g}), {f['victims']} "
        "tasks blocked by others; capacity "
        f"{'not declared' if f['capacity'] is None else f['capacity']}, peak {f['peak']}, "
        f"sharing {f['sharing'] or 'not declared'}"
    ]
    for u in doc["unexplained"]:
        lines.append(f"unexplained: {u['summary']}")
    for v in doc["verdicts"]:
        mode = "" if v["detector"] == v["failure_mode"] else f" ({v['failure_mode']})"
        head = f"{v['detector']}{mode}: {v['verdict']}"
        if v["verdict"] == "finding":
            lines += ["", f"{head}, rank {v['rank']}, score {v['score']:.2f}", f"   {v['summary']}"]
        else:
            score = "" if v.get("score") is None else f", score {v['score']:.2f}"
            lines += ["", head + score, f"   {v['why_not']}"]
        if v.get("evidence"):
            lines.append("   " + ", ".join(f"{k}={x}" for k, x in v["evidence"].items()))
    return "\n".join(lines)
