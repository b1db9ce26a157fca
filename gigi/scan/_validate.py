"""Runtime validation of scanned sites: run the instrumented program, then keep only the sites
whose events formed a plausible lifecycle (validate.sql says which). Sites a run never reached
are kept: a run can only speak for what it exercised."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gigi.queries._docs import parse
from gigi.scan._parse import ScanError
from gigi.schema import KIND_NAMES, SITES, normalize_batch

QUERY = Path(__file__).with_name("validate.sql")

REASONS = {
    "ACQUIRE": "none of enough of its ACQUIREs was ever released: it takes nothing",
    "RELEASE": "its RELEASEs ended no hold an ACQUIRE began: it gives nothing back",
    "USE": "its task used the object after releasing it",
    "WAIT": "no other task held the resource while it waited: nothing to wait for",
}


@dataclass
class Validation:
    sites: pa.Table  # the kept sites, trace format v1
    rows: list[dict]  # per candidate: site, kind, events, fitting, keep
    by_kind: dict[str, dict] = field(default_factory=dict)

    def removed(self) -> list[dict]:
        return [r for r in self.rows if not r["keep"]]

    def report(self) -> dict:
        return {"by_kind": self.by_kind, "removed": self.removed()}


def read_sites(path: str | os.PathLike) -> pa.Table:
    """A sites table: a Parquet file, or a scan's output directory holding sites.parquet."""
    p = Path(path)
    if p.is_dir():
        p = p / "sites.parquet"
    if not p.is_file():
        raise ScanError(f"{path}: no sites table (sites.parquet from gigi-query scan)")
    try:
        table = pq.read_table(p)
    except (OSError, pa.ArrowInvalid) as e:
        raise ScanError(f"{p}: not a Parquet sites table ({e})") from None
    checked = pa.Table.from_batches(
        [normalize_batch(b, SITES, path=str(p)) for b in table.to_batches()],
        schema=SITES.arrow_schema,
    )
    # the scan's own columns (object_expr, amount_expr: what the instrumenter inserts) ride
    # along, so that the pruned table instruments as the scanned one did
    for name in table.column_names:
        if name not in checked.column_names:
            checked = checked.append_column(table.schema.field(name), table.column(name))
    return checked


def validate(
    trace, sites: pa.Table, min_share: float | None = None, calls: Path | None = None
) -> Validation:
    """Judge every site of ``sites`` by its events in ``trace`` (a store, a store entry or a
    raw trace directory). With CALLS, the scan's call graph (hierarchy/calls.parquet): a site
    the run never reached, in a function that a removed site's function calls (directly or
    not) with an event of the same kind on the same resource, goes with it. The probes record
    one of nested events, the outer one's where it fires, so the removed one stood in its
    place: the run judged both, and the inner one alone would fire unpaired in the build
    deployed without the outer."""
    from gigi.queries import connect
    from gigi.queries._connect import memory_limit

    doc = parse(QUERY)
    share = float(doc.params["validate_min_share"].default) if min_share is None else min_share
    if not 0 <= share <= 1:
        raise ScanError(f"--min-share {share}: expected a share between 0 and 1")
    # (a whole run's holds: as much of the machine as a diagnosis takes, not the default)
    con = connect(
        trace,
        variables={"validate_min_share": share},
        memory_limit=memory_limit(),
        keep_order=False,
    )
    try:
        con.register("candidates", sites.select(["site", "kind"]))
        result = con.sql(doc.text).to_arrow_table()
    finally:
        con.close()
    rows = result.to_pylist()
    covered = _covered(sites, rows, calls) if calls is not None else {}
    for r in rows:
        if r["site"] in covered:
            r["keep"] = False
    keep = {r["site"] for r in rows if r["keep"]}
    for r in rows:
        r["kind"] = KIND_NAMES[r["kind"]]
        r["reason"] = (
            covered[r["site"]]
            if r["site"] in covered
            else "not exercised by this run"
            if r["events"] == 0
            else f"not judged: its RELEASEs give back 1 unit each against ACQUIREs of more "
            f"(other units), so no hold it began can close ({r['fitting']} of {r['events']})"
            if r["unjudged"]
            else f"{r['fitting']} of {r['events']} events fit"
            if r["keep"]
            else f"{REASONS[r['kind']]} ({r['fitting']} of {r['events']} events fit)"
        )
    by_kind = {}
    for kind in KIND_NAMES:
        mine = [r for r in rows if r["kind"] == kind]
        by_kind[kind] = {
            "candidates": len(mine),
            "exercised": sum(r["events"] > 0 for r in mine),
            "removed": sum(not r["keep"] for r in mine),
            "kept": sum(r["keep"] for r in mine),
        }
    mask = pa.array([s in keep for s in sites.column("site").to_pylist()], pa.bool_())
    return Validation(sites.filter(mask), rows, by_kind)


def _covered(sites: pa.Table, rows: list[dict], calls: Path) -> dict[int, str]:
    """Site -> why it goes: not reached, in a function the function of a removed site of the
    same kind and resource calls (``validate``)."""
    if not calls.is_file():
        return {}
    graph: dict[str, set[str]] = {}
    for c in pq.read_table(calls, columns=["function", "callee"]).to_pylist():
        graph.setdefault(c["function"], set()).add(c["callee"])
    info = {s["site"]: s for s in sites.select(["site", "function", "resource"]).to_pylist()}
    judged = {r["site"]: r for r in rows}
    out: dict[int, str] = {}
    for r in rows:
        if r["keep"] or r["events"] == 0 or r["site"] not in info:
            continue
        outer = info[r["site"]]
        seen, todo = {outer["function"]}, list(graph.get(outer["function"], ()))
        while todo:  # every function the removed site's function may call
            f = todo.pop()
            if f not in seen:
                seen.add(f)
                todo += graph.get(f, ())
        for site, s in info.items():
            inner = judged.get(site)
            if (
                inner is not None
                and inner["events"] == 0
                and inner["kind"] == r["kind"]
                and s["resource"] == outer["resource"]
                and s["function"] != outer["function"]
                and s["function"] in seen
            ):
                out.setdefault(
                    site,
                    f"not reached: {outer['function']} (site {r['site']}), which calls "
                    f"{s['function']}, stood in its place and was removed",
                )
    return out


def write(v: Validation, out: str | os.PathLike, scanned: str | os.PathLike | None = None) -> None:
    """OUT/sites.parquet (the pruned table) and OUT/validation.json (every verdict). With
    SCANNED, the scan's output folder, its resources table and hierarchy are copied beside, so
    that OUT is a sites folder `gigi-query instrument --sites` takes as it takes a scan's."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    src = Path(scanned) if scanned is not None else None
    if src is not None and src.is_dir() and src.resolve() != out.resolve():
        if (src / "resources.parquet").is_file():
            shutil.copyfile(src / "resources.parquet", out / "resources.parquet")
        if (src / "hierarchy").is_dir():
            shutil.copytree(src / "hierarchy", out / "hierarchy", dirs_exist_ok=True)
    tmp = out / "sites.parquet.tmp"
    pq.write_table(v.sites, tmp)
    os.replace(tmp, out / "sites.parquet")
    (out / "validation.json").write_text(json.dumps(v.report(), indent=1) + "\n")
