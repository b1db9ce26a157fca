"""From a trace to ranked findings: metrics, detectors, chains across resources, sites."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from gigi.detectors import COLUMNS, Detector, load, selected
from gigi.diagnosis._executing import executing, has_samples
from gigi.diagnosis._stages import Stages
from gigi.errors import DetectorError, IngestError, did_you_mean
from gigi.ingest import StoreEntry, locate
from gigi.queries._connect import memory_limit
from gigi.schema import KIND_NAMES, SITES, normalize_batch

# Failure modes that can drive findings on other resources (a root), as opposed to ones that
# are only ever consequences of load or of another resource.
_ROOT_MODES = {"unbounded_growth", "leak", "inefficient_policy"}
# When several detectors fire on one resource, the most specific explanation stands: a leak
# explains the growth and the waits it causes; a lock kept unused explains the contention.
# Modes whose culprits are the holders blamed for others' waits: their groups weigh blame.
_BLAMED = {"contention", "under_provisioning"}
_SPECIFICITY = (
    "leak",
    "inefficient_policy",
    "unbounded_growth",
    "contention",
    "under_provisioning",
    "inconsistent_state",
)


@dataclass
class Finding:
    failure_mode: str
    resource: str
    score: float
    culprit_tasks: list[int]
    victim_tasks: list[int]
    evidence: dict
    summary: str
    detector: str
    rank: int = 0
    caused_by: int | None = None
    sites: list[dict] = field(default_factory=list)
    cause: Finding | None = field(default=None, repr=False)
    # What the culprits were executing, from perf samples (gigi/diagnosis/_executing.py); None
    # when the trace has no samples. An extra field of the JSON finding, which the spec allows.
    executing: dict | None = None
    # Blame summed over tasks of one normalized name or one lineage (gigi/diagnosis/_groups.py),
    # an extra field of the JSON finding.
    culprit_groups: list[dict] = field(default_factory=list)
    # Another finding on the same resource that this one is listed right after (a resource
    # both contended and too small): ranked together, not a cause.
    beside: Finding | None = field(default=None, repr=False)
    # Why ``cause`` drives this finding, in words (an extra field of the JSON finding).
    cause_why: str = ""

    def to_json(self) -> dict:
        extra = {} if self.executing is None else {"executing": self.executing}
        if self.cause_why:
            extra["caused_because"] = self.cause_why
        return {
            "rank": self.rank,
            "failure_mode": self.failure_mode,
            "resource": self.resource,
            "score": round(self.score, 4),
            "culprit_tasks": self.culprit_tasks,
            "victim_tasks": self.victim_tasks,
            "caused_by": self.caused_by,
            "sites": self.sites,
            "evidence": self.evidence,
            "summary": self.summary,
            "culprit_groups": self.culprit_groups,
            **extra,
        }


@dataclass
class Verdict:
    """A detector's word on a resource it looked at and did not accuse: what it saw, and what
    fell short (its own ``why_not``, or a score under the report's threshold)."""

    detector: str
    failure_mode: str
    resource: str
    score: float | None
    evidence: dict
    why_not: str

    def to_json(self) -> dict:
        return {
            "detector": self.detector,
            "failure_mode": self.failure_mode,
            "resource": self.resource,
            "score": None if self.score is None else round(self.score, 4),
            "why_not": self.why_not,
            "evidence": self.evidence,
        }


@dataclass
class Unexplained:
    """A resource whose waits behind other tasks were significant and that no detector
    accused: what is known of it and every detector's verdict."""

    resource: str
    wait_ns: int
    blamed_wait_ns: int
    waiting_tasks: int
    culprit_tasks: list[int]
    culprit_groups: list[dict]
    verdicts: list[Verdict]
    summary: str

    def to_json(self) -> dict:
        return {
            "resource": self.resource,
            "wait_ns": self.wait_ns,
            "blamed_wait_ns": self.blamed_wait_ns,
            "waiting_tasks": self.waiting_tasks,
            "culprit_tasks": self.culprit_tasks,
            "culprit_groups": self.culprit_groups,
            "summary": self.summary,
            "verdicts": [v.to_json() for v in self.verdicts],
        }


@dataclass
class Diagnosis:
    trace: str
    events: int
    dropped: int
    findings: list[Finding]
    entry: StoreEntry | None
    con: object = field(repr=False, default=None)
    stages: Stages = field(repr=False, default_factory=Stages)
    # the trace's manifest: the store entry's, or the lake's for a diagnosis read in a lake
    manifest: object = field(repr=False, default=None)
    # resources with significant waits that no detector accused (an extra JSON field)
    unexplained: list[Unexplained] = field(default_factory=list)
    # every detector's verdict on the resources it did not accuse
    verdicts: list[Verdict] = field(default_factory=list, repr=False)
    # every resource with its wait figures, most waited for first (``gigi.diagnosis._explain``)
    waited: list[dict] = field(default_factory=list, repr=False)
    # (name, failure mode) of each detector run
    detectors: list[tuple[str, str]] = field(default_factory=list, repr=False)

    def to_json(self) -> dict:
        return {
            "version": 1,
            "trace": self.trace,
            "events": self.events,
            "dropped": self.dropped,
            "findings": [f.to_json() for f in self.findings],
            "unexplained": [u.to_json() for u in self.unexplained],
        }


class DuckDBEngine:
    """The diagnosis's access to one trace through a DuckDB connection (a store entry, or a
    lake read in place); ``gigi.lake`` has the Spark twin. SQL handed to ``rows`` is in
    DuckDB's dialect."""

    name = "duckdb"

    def __init__(self, con) -> None:
        self.con = con

    def set_params(self, values: dict[str, float]) -> None:
        from gigi.queries import set_variables

        set_variables(self.con, {name: float(value) for name, value in values.items()})

    def compute_metrics(self, stages: Stages) -> None:
        from gigi.diagnosis._metrics import compute

        compute(self.con, stages)

    def finish(self) -> None:
        """Undo what ``compute_metrics`` changed on the connection, once the diagnosis is
        over: nothing here (``gigi.lake``'s at-scale engine has a copy of a view to drop)."""

    def rows(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()

    def detector(self, det: Detector) -> list[tuple]:
        import duckdb

        try:  # run as written and pick the columns here: a relation would bind it twice
            cur = self.con.execute(det.sql)
            columns = [d[0] for d in cur.description]
            check_columns(det, columns)
            rows = cur.fetchall()
        except duckdb.Error as e:
            raise DetectorError(f"{det.path}: {str(e).splitlines()[0]}") from None
        at = [columns.index(c) for c in selected(columns)]
        return [tuple(row[i] for i in at) for row in rows]

    def register_sites(self, table: pa.Table) -> str:
        self.con.register("sites_given", table)
        return "sites_given"

    def has_samples(self) -> bool:
        return has_samples(self.con)

    def executing(self, f: Finding) -> dict:
        return executing(self.con, f.resource, f.culprit_tasks, f.victim_tasks)


def check_columns(det: Detector, columns: list[str]) -> None:
    missing = [c for c in COLUMNS if c not in columns]
    if missing:
        raise DetectorError(
            f"{det.path}: the query returns no column(s) {', '.join(missing)}; "
            f"a detector returns {', '.join(COLUMNS)}"
        )


def findings_of(det: Detector, rows: list[tuple]) -> tuple[list[Finding], list[Verdict]]:
    """A detector's rows (in ``COLUMNS`` order, then ``why_not`` if it has it) as findings, and
    as verdicts where ``why_not`` is set."""
    out, verdicts = [], []
    for row in rows:
        resource, score, culprits, victims, evidence, summary = row[:6]
        why_not = row[6] if len(row) > 6 else None
        if score is None and why_not is None:
            continue
        try:
            evidence = json.loads(evidence) if isinstance(evidence, str) else dict(evidence or {})
        except ValueError:
            raise DetectorError(
                f"{det.path}: evidence is not a JSON object: {evidence!r}"
            ) from None
        score = None if score is None else max(0.0, min(1.0, float(score)))
        if why_not is not None:
            verdicts.append(
                Verdict(det.name, det.failure_mode, resource, score, evidence, str(why_not))
            )
            continue
        out.append(
            Finding(
                det.failure_mode,
                resource,
                score,
                [int(t) for t in culprits or []],
                [int(t) for t in victims or []],
                evidence,
                summary or "",
                det.name,
            )
        )
    return out, verdicts


def _sql_list(values) -> str:
    return ", ".join(str(int(v)) for v in values)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# Pairs of modes that both stand on one resource, the first listed before the second: a
# resource can have a holder to blame and be too small besides.
_BESIDE = {("contention", "under_provisioning")}


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per resource, the most specific, the others named in its evidence; except
    that a finding whose mode stands beside the kept one's (``_BESIDE``) is kept too, listed
    right after it."""
    by_resource: dict[str, list[Finding]] = {}
    for f in findings:
        by_resource.setdefault(f.resource, []).append(f)
    kept = []
    for group in by_resource.values():
        group.sort(
            key=lambda f: (
                _SPECIFICITY.index(f.failure_mode)
                if f.failure_mode in _SPECIFICITY
                else len(_SPECIFICITY),
                -f.score,
            )
        )
        best, rest = group[0], group[1:]
        beside = [g for g in rest if (best.failure_mode, g.failure_mode) in _BESIDE][:1]
        rest = [g for g in rest if g not in beside]
        if rest:
            best.evidence["also_found"] = [
                {"failure_mode": g.failure_mode, "score": round(g.score, 3)} for g in rest
            ]
        kept.append(best)
        for g in beside:
            g.beside = best
            kept.append(g)
    return kept


def _link(engine, findings: list[Finding]) -> None:
    """Set each finding's cause, and why, by the first of three ways one resource's trouble
    drives another's that holds:

    - its top culprit does most of the work of a resource with a root finding: most of its
      acquisitions or most of its releases (purge giving back the undo records a long
      transaction kept, while it floods the buffer pool). Touching that resource as every
      task does (a lock table each transaction goes through) is no cause;
    - most of the blame for its waits reached its culprits through another resource with a
      finding: the holders its waiters were behind were waiting for that one (an inserter
      holding an insertion lock while it waits for WAL buffer space), and the blame passed
      on to its holders;
    - most of its waiting lies inside the same tasks' waits for another resource with a
      finding (a lock function's own waits inside the waits for the lock it takes for the
      WAL): the outer resource is what the code was waiting for.

    A link that would close a loop of causes is not made."""
    others = [g for g in findings if g.beside is None]
    roots = [g for g in others if g.failure_mode in _ROOT_MODES]
    drivers = _drivers(engine, roots)
    for f in findings:
        if not f.culprit_tasks or f.beside is not None:
            continue
        if f.failure_mode not in _ROOT_MODES:
            top = int(f.culprit_tasks[0])
            causes = [g for g in roots if g.resource != f.resource and (top, g.resource) in drivers]
            if causes:
                cause = max(causes, key=lambda g: g.score)
                _set_cause(f, cause, f"its top culprit drives {cause.resource}")
                continue
        elsewhere = [g for g in others if g.resource != f.resource]
        if not elsewhere or f.failure_mode not in _BLAMED:
            continue
        # the blame's way first; the waits inside others only where it links nothing
        through = _blamed_through(engine, f.resource)
        if not _link_by(
            f,
            elsewhere,
            through,
            "{:.0%} of its blame reached holders of {}, which its holders waited for",
        ):
            nested = _waits_inside(engine, f.resource, [g.resource for g in elsewhere])
            _link_by(f, elsewhere, nested, "{:.0%} of its waiting lies inside waits for {}")


def _link_by(f: Finding, elsewhere: list[Finding], shares: dict[str, float], how: str) -> bool:
    """Make the finding on the resource with the largest of SHARES, above one half, F's
    cause, said by HOW; whether one was made."""
    best = max(
        (r for r in shares if any(g.resource == r for g in elsewhere)),
        key=lambda r: (shares[r], r),
        default=None,
    )
    if best is None or shares[best] <= 0.5:
        return False
    cause = max((g for g in elsewhere if g.resource == best), key=lambda g: g.score)
    return _set_cause(f, cause, how.format(shares[best], best))


def _set_cause(f: Finding, cause: Finding, why: str) -> bool:
    """Make CAUSE F's cause, unless F already drives CAUSE (a loop); whether it was made."""
    g: Finding | None = cause
    while g is not None:
        if g is f:
            return False
        g = g.cause
    f.cause, f.cause_why = cause, why
    return True


def _drivers(engine, roots: list[Finding]) -> set[tuple[int, str]]:
    """(task, resource) where the task does most of the acquiring or most of the releasing
    of a resource of ROOTS: one query over their events, grouped by task."""
    if not roots:
        return set()
    rows = engine.rows(
        "SELECT resource, kind, task, count(*) FROM events WHERE kind IN (1, 3) "
        f"AND resource IN ({', '.join(_quote(r) for r in sorted({g.resource for g in roots}))}) "
        "GROUP BY resource, kind, task"
    )
    totals: dict[tuple[str, int], int] = {}
    for resource, kind, _, n in rows:
        totals[resource, kind] = totals.get((resource, kind), 0) + int(n)
    return {
        (int(task), resource)
        for resource, kind, task, n in rows
        if task is not None and 2 * int(n) > totals[resource, kind]
    }


def _blamed_through(engine, resource: str) -> dict[str, float]:
    """Per other resource, the share of the blame for the waits on RESOURCE that reached
    its culprits through it: the holders the waiters were behind were themselves waiting
    for that one, whose holders the blame passed on to (``metrics_blame``)."""
    rows = engine.rows(
        "SELECT culprit_resource, sum(blame_ns) FROM metrics_blame "
        f"WHERE resource = {_quote(resource)} GROUP BY culprit_resource"
    )
    total = sum(float(ns or 0) for _, ns in rows)
    if total <= 0:
        return {}
    return {r: float(ns or 0) / total for r, ns in rows if r != resource}


# the time waited for {mine}, and the part of it inside the same task's waits for {other}
WAITS_INSIDE = """
SELECT sum(CASE WHEN covered >= end_ts THEN dur ELSE 0 END), sum(dur)
FROM (
    SELECT mine, dur, end_ts,
           max(CASE WHEN mine = 0 THEN end_ts END) OVER (
               PARTITION BY task ORDER BY ts, mine
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS covered
    FROM (SELECT task, ts, end_ts, dur, 1 AS mine FROM waits WHERE resource = {mine}
          UNION ALL
          SELECT task, ts, end_ts, dur, 0 AS mine FROM waits WHERE resource = {other}) AS u
) AS x
WHERE mine = 1
"""


def _waits_inside(engine, resource: str, others: list[str]) -> dict[str, float]:
    """Per resource of OTHERS, the share of the time waited for RESOURCE that lies inside
    the same task's wait for that resource (begun before, ended after): a running maximum
    of the other waits' ends, in time order within each task."""
    out = {}
    for other in others:
        ((inside, total),) = engine.rows(
            WAITS_INSIDE.format(mine=_quote(resource), other=_quote(other))
        )
        if total:
            out[other] = float(inside or 0) / float(total)
    return out


def _rank(findings: list[Finding]) -> list[Finding]:
    """Roots by weight (their score, or the highest of what they cause), each followed by
    what it causes; ranks numbered from 1."""
    children: dict[int, list[Finding]] = {}
    beside: dict[int, list[Finding]] = {}
    for f in findings:
        if f.cause is not None:
            children.setdefault(id(f.cause), []).append(f)
        if f.beside is not None:
            beside.setdefault(id(f.beside), []).append(f)
    ordered: list[Finding] = []

    def visit(f: Finding) -> None:
        ordered.append(f)
        ordered.extend(beside.get(id(f), []))
        for child in sorted(children.get(id(f), []), key=lambda g: -g.score):
            visit(child)

    def weight(f: Finding) -> float:
        # a root weighs as much as the heaviest finding it explains
        return max([f.score, *(weight(c) for c in children.get(id(f), []))])

    for root in sorted(
        (f for f in findings if f.cause is None and f.beside is None),
        # among equal weights, the resource waited for longest first
        key=lambda g: (-weight(g), -float(g.evidence.get("wait_ns") or 0)),
    ):
        visit(root)
    for rank, f in enumerate(ordered, 1):
        f.rank = rank
    for f in ordered:
        f.caused_by = f.cause.rank if f.cause is not None else None
        if f.cause is not None:  # a root's victims include those of its consequences
            root = f.cause
            root.victim_tasks += [t for t in f.victim_tasks if t not in root.victim_tasks]
    return ordered


def _load_sites(path: Path) -> pa.Table:
    import pyarrow.parquet as pq

    try:
        if path.suffix == ".parquet":
            table = pq.read_table(path)
        else:
            import pyarrow.ipc as ipc

            try:
                table = ipc.open_file(path).read_all()
            except pa.ArrowInvalid:
                table = ipc.open_stream(path).read_all()
    except (OSError, pa.ArrowInvalid) as e:
        raise IngestError(f"{path}: cannot read a sites table ({str(e).splitlines()[0]})") from None
    return pa.Table.from_batches([normalize_batch(table, SITES, path=str(path))])


def _sites(engine, f: Finding, sites_view: str) -> list[dict]:
    """The culprits' and victims' sites on the finding's resource, most events first (the
    victims': where they waited longest first, as a site of many short waits is not where
    the time went); then on the resource its name extends (a log's own structure: the reader
    that pinned Wal.frames did so through its hold of Wal)."""
    resources = [f.resource]
    if "." in f.resource:
        resources.append(f.resource.rsplit(".", 1)[0])
    rows = []
    for role, tasks, kinds, weight in (
        ("culprit", f.culprit_tasks[:5], (1, 2, 3), "count(*)"),
        ("victim", f.victim_tasks[:20], (0,), "sum(coalesce(e.dur, 0))"),
    ):
        if not tasks:
            continue
        found = engine.rows(
            f"""
            SELECT s.file, s.line, s.function, e.kind, {weight} AS n
            FROM events e JOIN {sites_view} s ON s.site = e.site
            WHERE e.resource IN ({", ".join(_quote(r) for r in resources)})
              AND e.task IN ({_sql_list(tasks)})
              AND e.kind IN ({_sql_list(kinds)}) AND s.file IS NOT NULL
            GROUP BY e.resource <> {_quote(f.resource)}, s.file, s.line, s.function, e.kind
            ORDER BY e.resource <> {_quote(f.resource)}, n DESC, s.file, s.line, s.function,
                e.kind
            LIMIT 3"""
        )
        rows += [
            dict(
                zip(
                    ("file", "line", "function", "kind", "role"),
                    (*r[:3], KIND_NAMES[r[3]], role),
                    strict=True,
                )
            )
            for r in found
        ]
    return rows


def diagnose(
    target: str | os.PathLike | StoreEntry,
    *,
    trace: str | None = None,
    sites: str | os.PathLike | None = None,
    detectors: list[str | os.PathLike] | None = None,
    threshold: float = 0.5,
    params: dict[str, float] | None = None,
) -> Diagnosis:
    """Diagnose one trace: findings at or above ``threshold``, root causes first.

    ``sites`` names a sites table (Parquet or Arrow) to use instead of the trace's own;
    ``detectors`` adds folders of .sql detectors; ``params`` overrides detector parameters.
    """
    from gigi.queries import connect

    entry = target if isinstance(target, StoreEntry) else locate(target, trace)
    dets = load_detectors(detectors, params)
    con = connect(entry, memory_limit=memory_limit(), keep_order=False)
    m = entry.manifest
    from gigi.lake import _duckdb_metrics as at_scale

    # a trace too large to hold: its metrics a stretch of time at a time, as for a lake
    engine = at_scale.StretchedEngine(con) if m.events >= at_scale.AT_SCALE else DuckDBEngine(con)
    d = run(engine, dets, params, threshold=threshold, sites=sites)
    d.trace, d.events, d.dropped, d.entry, d.con = m.trace_id, m.events, m.dropped, entry, con
    d.manifest = m
    return d


def load_detectors(
    detectors: list[str | os.PathLike] | None, params: dict[str, float] | None
) -> list[Detector]:
    """The built-in detectors and those of ``detectors``; ``params`` must name their
    parameters."""
    dets = load([Path(d) for d in detectors or []])
    known = {p for d in dets for p in d.params}
    for name in params or {}:
        if name not in known:
            raise DetectorError(f"no detector parameter {name!r}{did_you_mean(name, known)}")
    return dets


def run(
    engine,
    dets: list[Detector],
    params: dict[str, float] | None,
    *,
    threshold: float = 0.5,
    sites: str | os.PathLike | None = None,
) -> Diagnosis:
    """Metrics, detectors, ranking, chains and sites over the trace behind ``engine``
    (``DuckDBEngine``, or the Spark one of ``gigi.lake``); the caller fills in the trace's
    id and counts."""
    values = {p.name: p.default for d in dets for p in d.params.values()}
    values.update({k: float(v) for k, v in (params or {}).items()})
    engine.set_params(values)
    try:
        return _run(engine, dets, threshold, sites)
    finally:
        engine.finish()


def _run(engine, dets: list[Detector], threshold: float, sites) -> Diagnosis:
    from gigi.diagnosis._explain import unexplained, waited
    from gigi.diagnosis._groups import blame_by_culprit, culprit_groups

    stages = Stages()
    engine.compute_metrics(stages)
    findings, verdicts = [], []
    for det in dets:
        with stages(f"detector {det.name}"):
            found, said = findings_of(det, engine.detector(det))
        verdicts += said
        for f in found:
            if f.score >= threshold:
                findings.append(f)
            else:
                verdicts.append(
                    Verdict(
                        det.name,
                        f.failure_mode,
                        f.resource,
                        f.score,
                        f.evidence,
                        f"score {f.score:.2f} is under the report's threshold {threshold:g}: "
                        f"{f.summary}",
                    )
                )
    with stages("rank, link and sites"):
        findings = _dedupe(findings)
        _link(engine, findings)
        ranked = _rank(findings)
        sites_view = "sites"
        if sites is not None:
            sites_view = engine.register_sites(_load_sites(Path(sites)))
        for f in ranked:
            f.sites = _sites(engine, f, sites_view)
    with stages("culprit groups and what no detector explained"):
        for f in ranked:
            weights = blame_by_culprit(engine, f.resource) if f.failure_mode in _BLAMED else {}
            f.culprit_groups = culprit_groups(engine, weights or dict.fromkeys(f.culprit_tasks, 1))
        figures = waited(engine)
        lost = unexplained(engine, figures, ranked, verdicts)
    if engine.has_samples():
        with stages("what the culprits executed (perf samples)"):
            for f in ranked:
                f.executing = engine.executing(f)
    d = Diagnosis("", 0, 0, ranked, None, None, stages)
    d.unexplained, d.verdicts, d.waited = lost, verdicts, figures
    d.detectors = [(det.name, det.failure_mode) for det in dets]
    return d
