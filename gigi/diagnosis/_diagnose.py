"""From a trace to ranked findings: metrics, detectors, chains across resources, sites."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from gigi.detectors import COLUMNS, Detector, load
from gigi.diagnosis._executing import executing, has_samples
from gigi.diagnosis._stages import Stages
from gigi.errors import DetectorError, IngestError, did_you_mean
from gigi.ingest import StoreEntry, locate
from gigi.schema import KIND_NAMES, SITES, normalize_batch

# Failure modes that can drive findings on other resources (a root), as opposed to ones that
# are only ever consequences of load or of another resource.
_ROOT_MODES = {"unbounded_growth", "leak", "inefficient_policy"}
# When several detectors fire on one resource, the most specific explanation stands: a leak
# explains the growth and the waits it causes; a lock kept unused explains the contention.
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

    def to_json(self) -> dict:
        extra = {} if self.executing is None else {"executing": self.executing}
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
            **extra,
        }


@dataclass
class Diagnosis:
    trace: str
    events: int
    dropped: int
    findings: list[Finding]
    entry: StoreEntry
    con: object = field(repr=False, default=None)
    stages: Stages = field(repr=False, default_factory=Stages)

    def to_json(self) -> dict:
        return {
            "version": 1,
            "trace": self.trace,
            "events": self.events,
            "dropped": self.dropped,
            "findings": [f.to_json() for f in self.findings],
        }


def _run_detector(con, det: Detector) -> list[Finding]:
    import duckdb

    try:
        rel = con.sql(det.sql)
    except duckdb.Error as e:
        raise DetectorError(f"{det.path}: {str(e).splitlines()[0]}") from None
    missing = [c for c in COLUMNS if c not in rel.columns]
    if missing:
        raise DetectorError(
            f"{det.path}: the query returns no column(s) {', '.join(missing)}; "
            f"a detector returns {', '.join(COLUMNS)}"
        )
    try:
        rows = rel.select(*COLUMNS).fetchall()
    except duckdb.Error as e:
        raise DetectorError(f"{det.path}: {str(e).splitlines()[0]}") from None
    out = []
    for row in rows:
        resource, score, culprits, victims, evidence, summary = row
        if score is None:
            continue
        try:
            evidence = json.loads(evidence) if isinstance(evidence, str) else dict(evidence or {})
        except ValueError:
            raise DetectorError(
                f"{det.path}: evidence is not a JSON object: {evidence!r}"
            ) from None
        out.append(
            Finding(
                det.failure_mode,
                resource,
                max(0.0, min(1.0, float(score))),
                [int(t) for t in culprits or []],
                [int(t) for t in victims or []],
                evidence,
                summary or "",
                det.name,
            )
        )
    return out


def _dedupe(findings: list[Finding]) -> list[Finding]:
    """One finding per resource: the most specific; the others are named in its evidence."""
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
        best = group[0]
        if len(group) > 1:
            best.evidence["also_found"] = [
                {"failure_mode": g.failure_mode, "score": round(g.score, 3)} for g in group[1:]
            ]
        kept.append(best)
    return kept


def _link(con, findings: list[Finding]) -> None:
    """Set each finding's cause: a root finding on another resource that its top culprit
    acquires or releases (purge releasing undo records while it floods the buffer pool)."""
    for f in findings:
        if not f.culprit_tasks or f.failure_mode in _ROOT_MODES:
            continue
        top = f.culprit_tasks[0]
        touched = {
            r
            for (r,) in con.execute(
                "SELECT DISTINCT resource FROM events WHERE task = ? AND kind IN (1, 3)", [top]
            ).fetchall()
        }
        causes = [
            g
            for g in findings
            if g is not f
            and g.resource != f.resource
            and g.failure_mode in _ROOT_MODES
            and g.resource in touched
        ]
        if causes:
            f.cause = max(causes, key=lambda g: g.score)


def _rank(findings: list[Finding]) -> list[Finding]:
    """Roots by score, each followed by what it causes; ranks numbered from 1."""
    children: dict[int, list[Finding]] = {}
    for f in findings:
        if f.cause is not None:
            children.setdefault(id(f.cause), []).append(f)
    ordered: list[Finding] = []

    def visit(f: Finding) -> None:
        ordered.append(f)
        for child in sorted(children.get(id(f), []), key=lambda g: -g.score):
            visit(child)

    for root in sorted((f for f in findings if f.cause is None), key=lambda g: -g.score):
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


def _sites(con, f: Finding, sites_view: str) -> list[dict]:
    rows = []
    for role, tasks, kinds in (
        ("culprit", f.culprit_tasks[:5], (1, 2, 3)),
        ("victim", f.victim_tasks[:20], (0,)),
    ):
        if not tasks:
            continue
        rows += [
            dict(
                zip(
                    ("file", "line", "function", "kind", "role"),
                    (*r[:3], KIND_NAMES[r[3]], role),
                    strict=True,
                )
            )
            for r in con.execute(
                f"""
            SELECT s.file, s.line, s.function, e.kind, count(*) AS n
            FROM events e JOIN {sites_view} s ON s.site = e.site
            WHERE e.resource = ? AND e.task IN (SELECT unnest(?::BIGINT[]))
              AND e.kind IN (SELECT unnest(?::UTINYINT[])) AND s.file IS NOT NULL
            GROUP BY ALL ORDER BY n DESC LIMIT 3""",
                [f.resource, tasks, list(kinds)],
            ).fetchall()
        ]
    return rows


def _memory_limit() -> str:
    """DuckDB's share of the machine for a diagnosis: 40% of physical memory (at least 2 GB);
    the kernels' arrays live beside it. Beyond it DuckDB spills to disk."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "2GB"
    return f"{max(2 << 30, int(total * 0.4)) >> 20}MB"


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
    from gigi.diagnosis._metrics import compute
    from gigi.queries import connect

    entry = target if isinstance(target, StoreEntry) else locate(target, trace)
    dets = load([Path(d) for d in detectors or []])
    known = {p for d in dets for p in d.params}
    for name in params or {}:
        if name not in known:
            raise DetectorError(f"no detector parameter {name!r}{did_you_mean(name, known)}")
    con = connect(entry, memory_limit=_memory_limit(), keep_order=False)
    values = {p.name: p.default for d in dets for p in d.params.values()}
    values.update({k: float(v) for k, v in (params or {}).items()})
    for name, value in values.items():
        con.execute(f"SET VARIABLE {name} = {float(value)!r}")
    stages = Stages()
    compute(con, stages)
    findings = []
    for det in dets:
        with stages(f"detector {det.name}"):
            findings += _run_detector(con, det)
    with stages("rank, link and sites"):
        findings = _dedupe([f for f in findings if f.score >= threshold])
        _link(con, findings)
        ranked = _rank(findings)
        sites_view = "sites"
        if sites is not None:
            con.register("sites_given", _load_sites(Path(sites)))
            sites_view = "sites_given"
        for f in ranked:
            f.sites = _sites(con, f, sites_view)
    if has_samples(con):
        with stages("what the culprits executed (perf samples)"):
            for f in ranked:
                f.executing = executing(con, f.resource, f.culprit_tasks, f.victim_tasks)
    m = entry.manifest
    return Diagnosis(m.trace_id, m.events, m.dropped, ranked, entry, con, stages)
