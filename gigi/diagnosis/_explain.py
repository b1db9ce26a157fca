"""What the diagnosis saw beside its findings: the resources tasks waited for most, and those
whose waits behind other tasks were significant but that no detector accused.

Silence is a finding too. A resource whose waits behind other tasks reach ``min_wait`` (a
share of the trace's length; a detector parameter) either gets a finding or is listed here as
unexplained, with what is known and every detector's verdict on it; when nothing was found,
the report names the most waited-for resources and why each detector let them be.
"""

from __future__ import annotations

from gigi.diagnosis._groups import blame_by_culprit, culprit_groups

# how many of the most waited-for resources the no-findings report names
MOST = 5
_FIGURES = (
    "resource",
    "waits",
    "wait_ns",
    "blamed_ns",
    "unattributed_ns",
    "victims",
    "trace_ns",
    "capacity",
    "peak",
    "sharing",
    "min_wait",
)


def waited(engine) -> list[dict]:
    """Every resource, most waited for first, with its figures."""
    rows = engine.rows(
        f"""
        SELECT {", ".join(_FIGURES[:-1])}, getvariable('min_wait') AS min_wait
        FROM metrics_resources
        ORDER BY wait_ns DESC, resource"""
    )
    out = []
    for row in rows:
        figures = {
            k: v if v is None or isinstance(v, str | bool | int) else float(v)
            for k, v in zip(_FIGURES, row, strict=True)
        }
        # as the detectors weigh it: blamed wait, by the share of all the wait it is; all
        # the wait where one holder at a time is admitted (each wait is behind one)
        share = figures["blamed_ns"] / max(figures["wait_ns"], 1)
        figures["weighed_blame"] = figures["blamed_ns"] / max(figures["trace_ns"], 1) * share
        if figures["sharing"] == "exclusive" or figures["capacity"] == 1:
            figures["weighed_blame"] = figures["wait_ns"] / max(figures["trace_ns"], 1)
        figures["significant"] = figures["weighed_blame"] >= figures["min_wait"]
        out.append(figures)
    return out


def unexplained(engine, figures: list[dict], findings, verdicts) -> list:
    """The resources whose waits behind others are significant and that have no finding."""
    from gigi.diagnosis._diagnose import Unexplained

    accused = {f.resource for f in findings}
    out = []
    for fig in figures:
        if not fig["significant"] or fig["resource"] in accused:
            continue
        resource = fig["resource"]
        said = [v for v in verdicts if v.resource == resource]
        weights = blame_by_culprit(engine, resource)
        top = sorted(weights, key=lambda t: (-weights[t], t))[:5]
        reasons = "; ".join(f"{v.detector}: {v.why_not}" for v in said) or (
            "no detector has a verdict on it"
        )
        out.append(
            Unexplained(
                resource,
                int(fig["wait_ns"]),
                int(fig["blamed_ns"]),
                int(fig["victims"]),
                top,
                culprit_groups(engine, weights),
                said,
                f"{fig['victims']} tasks waited {fig['blamed_ns'] / 1e9:.1f} s for {resource} "
                f"behind other tasks ({fig['blamed_ns'] / fig['trace_ns']:.2f} x the trace's "
                f"length), and no failure mode fits: {reasons}",
            )
        )
    return out


def why_quiet(figure: dict, verdicts) -> list[str]:
    """Lines saying what was seen of one resource and why no detector accused it."""
    trace_ns = max(figure["trace_ns"], 1)
    lines = [
        f"{figure['resource']}: {figure['waits']:,} waits, {figure['wait_ns'] / 1e9:.2f} s "
        f"waited, {figure['blamed_ns'] / 1e9:.2f} s of it behind other tasks "
        f"({figure['blamed_ns'] / trace_ns:.3f} x the trace's length, weighing "
        f"{figure['weighed_blame']:.3f}; significant from {figure['min_wait']:g})"
    ]
    if figure["waits"] and figure["unattributed_ns"] > 0.5 * figure["wait_ns"]:
        lines.append(
            f"  {figure['unattributed_ns'] / 1e9:.2f} s of the waits had no task holding it: "
            "the slow path itself (I/O, allocation, waiting for work), or holders the trace "
            "does not record"
        )
    for v in verdicts:
        if v.resource == figure["resource"]:
            lines.append(f"  {v.detector}: {v.why_not}")
    return lines


def explain(d, resource: str) -> dict:
    """Every detector's word on one resource of diagnosis ``d``: its figures, the findings on
    it, and each detector's verdict (fired, did not fire and why, or saw nothing of it)."""
    from gigi.errors import GigiError, did_you_mean

    figures = {f["resource"]: f for f in d.waited}
    if resource not in figures:
        raise GigiError(
            f"--explain: no resource {resource!r} in the trace{did_you_mean(resource, figures)}"
        )
    fired = {f.detector: f for f in d.findings if f.resource == resource}
    lost = [u for u in d.unexplained if u.resource == resource]
    said: dict[str, list] = {}
    for v in d.verdicts:
        if v.resource == resource:
            said.setdefault(v.detector, []).append(v)
    verdicts = []
    for name, mode in d.detectors:
        entry = {"detector": name, "failure_mode": mode}
        if name in fired:
            f = fired[name]
            entry |= {
                "verdict": "finding",
                "rank": f.rank,
                "score": round(f.score, 4),
                "summary": f.summary,
                "evidence": f.evidence,
            }
        elif name in said:
            v = said[name][0]
            entry |= {
                "verdict": "no finding",
                "score": None if v.score is None else round(v.score, 4),
                "why_not": v.why_not,
                "evidence": v.evidence,
            }
        else:
            entry |= {
                "verdict": "nothing to judge",
                "why_not": f"saw nothing of {mode.replace('_', ' ')} on {resource}",
            }
        verdicts.append(entry)
    figure = {k: v for k, v in figures[resource].items() if k != "resource"}
    return {
        "resource": resource,
        "figures": figure,
        "unexplained": [u.to_json() for u in lost],
        "verdicts": verdicts,
    }
