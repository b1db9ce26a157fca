"""``gigi-query``: the command line. Thin: every command calls one library entry point."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from gigi._interrupts import handling, received, write_atomic
from gigi.errors import GigiError

app = typer.Typer(
    name="gigi-query",
    help="Diagnose performance problems in application-defined resources from "
    "WAIT/ACQUIRE/USE/RELEASE traces.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

# Output options shared by every read command.
FormatOpt = Annotated[
    str,
    typer.Option("--format", "-f", help="table, csv, json, parquet or arrow.", metavar="FORMAT"),
]
OutputOpt = Annotated[
    Path | None,
    typer.Option("--output", "-o", help="Write to FILE instead of stdout.", metavar="FILE"),
]
TraceOpt = Annotated[
    str | None,
    typer.Option("--trace", help="Trace id, when TARGET is a store holding several traces."),
]
ParamOpt = Annotated[
    list[str] | None,
    typer.Option("--param", "-p", help="NAME=VALUE for a query parameter (repeatable)."),
]
Target = Annotated[
    Path,
    typer.Argument(help="A store (from ingest), one trace in a store, or a raw trace directory."),
]

# where a diagnosis reads its trace: a store or trace directory, or a lake read in place
LakeOpt = Annotated[
    Path | None,
    typer.Option(help="Diagnose a trace of this lake (ingest --lake) where it lies."),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        help="With --lake: duckdb (this machine) or spark (pip install 'gigi[spark]', Java 17+)."
    ),
]
MasterOpt = Annotated[
    str | None,
    typer.Option(help="Spark master URL (spark://host:7077); local mode by default."),
]
SparkMemoryOpt = Annotated[
    str | None, typer.Option(help="Spark driver memory cap (4g); default 2g.")
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        help="With --lake: only events from this time: ns on the trace's clock, or ISO 8601 "
        "(UTC unless it says otherwise)."
    ),
]
UntilOpt = Annotated[
    str | None, typer.Option(help="With --lake: only events before this time (as --since).")
]
ResourceOpt = Annotated[
    list[str] | None,
    typer.Option(help="With --lake: only this resource's events (repeatable)."),
]
OptionalTarget = Annotated[
    Path | None,
    typer.Argument(
        help="A store (from ingest), one trace in a store, or a raw trace directory; leave "
        "out with --lake."
    ),
]

DEFAULT_STORE = "gigi-store"


def _stderr():
    from rich.console import Console

    return Console(stderr=True)


def _params(values: list[str] | None) -> dict[str, str]:
    out = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise GigiError(f"--param {item!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out


@app.command(
    epilog="Example: gigi-query ingest ./trace --store ./gigi-store --perf perf.txt   "
    "(perf.txt: `perf record -k mono -g -- ./app` then `perf script --header > perf.txt`)"
)
def ingest(
    trace_dir: Annotated[
        Path | None,
        typer.Argument(
            help="Trace directory of segments; leave out to add --perf samples to a trace "
            "already in --store."
        ),
    ] = None,
    store: Annotated[
        Path, typer.Option(help="Store to write into; the trace goes to STORE/<trace id>.")
    ] = Path(DEFAULT_STORE),
    run_rows: Annotated[
        int,
        typer.Option(
            help="Events sorted in memory at once (about 60 bytes each); the rest "
            "waits on disk in the store."
        ),
    ] = 1 << 20,
    perf: Annotated[
        Path | None,
        typer.Option(
            help="Text of `perf script` (stacks with -g, any -F fields with tid and time) "
            "recorded beside the trace, best with `perf record -k mono`: its samples become "
            "the samples table, joined to tasks by thread and time."
        ),
    ] = None,
    perf_offset: Annotated[
        int,
        typer.Option(
            help="ns added to perf's times to put them on the trace's clock (0 when perf "
            "recorded with -k mono)."
        ),
    ] = 0,
    trace: TraceOpt = None,
    otlp: Annotated[
        Path | None,
        typer.Option(
            help="OpenTelemetry spans instead of a trace directory: OTLP/JSON (or JSON lines, "
            "as the Collector's file exporter writes) or OTLP protobuf. Spans with gigi.kind "
            "become events, the others tasks (see the README). Example: gigi-query ingest "
            "--otlp spans.jsonl --store ./gigi-store",
            metavar="FILE",
        ),
    ] = None,
    lake: Annotated[
        Path | None,
        typer.Option(
            help="Lake (hive-partitioned Parquet: LAKE/events/trace=ID/day=DAY/...) to put the "
            "trace into instead of the store; TRACE_DIR may then be a store too.",
        ),
    ] = None,
) -> None:
    """Read every segment of a trace, validate it, and write it into a store (or a lake);
    with --perf, the perf samples recorded beside it too; with --otlp, OpenTelemetry spans."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from gigi.ingest import ingest as run_ingest
    from gigi.ingest import ingest_perf

    console = _stderr()
    if lake is not None:
        return _ingest_lake(trace_dir, lake, trace, run_rows, perf, otlp)
    if otlp is not None:
        return _ingest_otlp(otlp, trace_dir, store, run_rows, perf, perf_offset)
    if trace_dir is None:
        if perf is None:
            raise GigiError("ingest: give a trace directory, or --perf FILE for a stored trace")
        entry, manifest = ingest_perf(store, perf, trace=trace, perf_offset_ns=perf_offset)
        for note in manifest.notes:
            console.print(f"warning: {note}", highlight=False)
        typer.echo(_perf_line(manifest, entry))
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(
                    {"read": "reading", "write": "writing"}[stage], total=total or 1
                )
            bar.update(tasks[stage], completed=done)

        manifest = run_ingest(
            trace_dir,
            store,
            run_rows=run_rows,
            progress=progress,
            perf=perf,
            perf_offset_ns=perf_offset,
        )
    for note in manifest.notes:
        console.print(f"warning: {note}", highlight=False)
    typer.echo(
        f"ingested {manifest.events:,} events, {manifest.tasks:,} tasks, "
        f"{manifest.resources} resources from {manifest.segments_read} segments "
        f"into {store / manifest.trace_id}"
    )
    typer.echo(_drops_line(manifest))
    if perf is not None:
        typer.echo(_perf_line(manifest, store / manifest.trace_id))


def _ingest_otlp(otlp: Path, trace_dir, store: Path, run_rows: int, perf, perf_offset) -> None:
    from gigi.ingest import ingest_otlp

    if trace_dir is not None:
        raise GigiError("ingest: give a trace directory or --otlp FILE, not both")
    with _stderr().status(f"reading {otlp}"):
        manifest, s = ingest_otlp(
            otlp, store, run_rows=run_rows, perf=perf, perf_offset_ns=perf_offset
        )
    typer.echo(
        f"{s.encoding}: {s.spans:,} spans of {s.traces:,} traces from {otlp}"
        + (f" ({s.duplicates:,} repeated spans read once)" if s.duplicates else "")
        + f"; {s.resource_spans:,} spans and {s.span_events:,} span events with gigi.kind became "
        f"{s.events:,} events of {s.tasks:,} tasks"
        + (f" ({s.remapped:,} task ids moved off their span id)" if s.remapped else "")
    )
    typer.echo(
        f"ingested {manifest.events:,} events, {manifest.tasks:,} tasks, "
        f"{manifest.resources} resources into {store / manifest.trace_id}"
    )
    if perf is not None:
        typer.echo(_perf_line(manifest, store / manifest.trace_id))


def _ingest_lake(trace_dir, lake: Path, trace, run_rows: int, perf, otlp) -> None:
    from gigi.ingest._lake import ingest_lake

    if trace_dir is None:
        raise GigiError("ingest --lake: give the trace directory (or store) to put into it")
    if perf is not None or otlp is not None:
        raise GigiError("ingest --lake: ingest --perf or --otlp into a store first, then that")
    m = ingest_lake(trace_dir, lake, trace=trace, run_rows=run_rows)
    typer.echo(
        f"ingested {m.events:,} events, {m.tasks:,} tasks, {m.resources} resources "
        f"into lake {lake} as trace={m.trace_id}"
    )
    typer.echo(_drops_line(m))


def _perf_line(manifest, entry: Path) -> str:
    p = manifest.perf
    events = ", ".join(f"{name} {n:,}" for name, n in p["events"].items()) or "none"
    return (
        f"perf: {p['samples']:,} samples ({events}) from {p['file']} into {entry}; "
        f"{p['in_trace']:,} within the trace's time, {p['on_trace_threads']:,} on its "
        f"threads; clock {p['clock']}"
    )


def _open(target: Path, trace: str | None):
    """Locate the trace, and say on stderr when its figures rest on incomplete data."""
    from gigi.ingest import locate

    entry = locate(target, trace)
    m = entry.manifest
    if m.dropped or m.bytes_lost:
        print(
            f"gigi-query: note: trace {m.trace_id} is incomplete: {_drops_line(m)}", file=sys.stderr
        )
    return entry


def _connect(target: Path, trace: str | None, param: list[str] | None):
    """The read-only connection of ``sql`` and ``query``, with their --param variables."""
    from gigi.queries import connect

    return connect(_open(target, trace), variables=_params(param))


def _drops_line(manifest) -> str:
    if not manifest.dropped and not manifest.bytes_lost:
        return "dropped: 0 events; bytes lost: 0"
    per = ", ".join(f"{r} {n:,}" for r, n in sorted(manifest.dropped_by_resource.items()))
    return (
        f"dropped: {manifest.dropped:,} events"
        + (f" ({per})" if per else "")
        + f"; bytes lost: {manifest.bytes_lost:,}"
    )


@app.command(
    epilog='Example: gigi-query sql gigi-store "SELECT resource, count(*) FROM events '
    'GROUP BY 1" --format csv'
)
def sql(
    target: Target,
    query: Annotated[str, typer.Argument(help="SQL (DuckDB dialect); read-only.")],
    format: FormatOpt = "table",
    output: OutputOpt = None,
    trace: TraceOpt = None,
    param: ParamOpt = None,
) -> None:
    """Run a read-only SQL query over a trace's views (events, holds, waits, ...)."""
    from gigi._output import write_result
    from gigi.queries import run

    con = _connect(target, trace, param)
    write_result(run(con, query).to_arrow_table(), format, output)


@app.command(epilog="Example: gigi-query query wait_summary gigi-store --format json")
def query(
    name: Annotated[str, typer.Argument(help="Named query; `gigi-query queries` lists them.")],
    target: Target,
    format: FormatOpt = "table",
    output: OutputOpt = None,
    trace: TraceOpt = None,
    param: ParamOpt = None,
) -> None:
    """Run one of gigi's named queries over a trace."""
    from gigi._output import write_result
    from gigi.queries import run_named

    con = _connect(target, trace, param)
    write_result(run_named(con, name).to_arrow_table(), format, output, title=name)


@app.command(epilog="Example: gigi-query queries")
def queries() -> None:
    """List the named queries and the views, with what each column holds."""
    from gigi.queries import named_queries, views

    for heading, docs in (("named queries", named_queries()), ("views", views())):
        typer.echo(f"{heading}:")
        for doc in docs.values():
            typer.echo(f"  {doc.name}: {doc.summary}")
            for p in doc.params.values():
                typer.echo(f"      param {p.name} = {p.default}: {p.doc}")
            for col, text in doc.columns.items():
                typer.echo(f"      {col}: {text}")


@app.command(epilog="Example: gigi-query info gigi-store")
def info(
    target: Target,
    trace: TraceOpt = None,
    format: FormatOpt = "table",
    output: OutputOpt = None,
) -> None:
    """Describe a trace: events, time range, tasks, resources, drops, segments."""
    from gigi._output import write_result
    from gigi.queries import connect, run

    entry = _open(target, trace)
    m = entry.manifest
    con = connect(entry)
    table = run(
        con,
        "SELECT d.resource, r.capacity, r.unit, r.sharing, d.recorded, d.dropped, "
        "d.sample_every FROM drops d JOIN resources r USING (resource) "
        "ORDER BY resource",
    ).to_arrow_table()
    if format != "table":
        write_result(table, format, output)
        return
    span = (m.end - m.start) / 1e9 if m.start is not None and m.end is not None else 0.0
    typer.echo(f"trace {m.trace_id} at {entry.path}")
    typer.echo(
        f"events {m.events:,} over {span:.3f} s; tasks {m.tasks:,}; holds {m.holds:,} "
        f"({m.open_holds:,} open); sites {m.sites}"
    )
    typer.echo(f"segments read {m.segments_read}; writers: {', '.join(m.writers) or 'unknown'}")
    typer.echo(_drops_line(m))
    if m.perf:
        typer.echo(_perf_line(m, entry.path))
    for note in m.notes:
        typer.echo(f"note: {note}")
    write_result(table, "table", output, title="resources")


@app.command(epilog="Example: gigi-query demo --out ./gigi-demo")
def demo(
    out: Annotated[Path, typer.Option(help="Directory for the trace and the store.")] = Path(
        "gigi-demo"
    ),
    seconds: Annotated[float, typer.Option(help="How long the clients run.")] = 7.0,
    healthy: Annotated[
        bool, typer.Option(help="Run without the long transaction: nothing should be found.")
    ] = False,
    scenario: Annotated[
        str | None, typer.Option(help="Run a workload of the scenario suite instead (--list).")
    ] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the scenarios and stop.")] = False,
) -> None:
    """Run the embedded engine workload (undo growth, then purge floods the buffer pool),
    record it, ingest it, summarize it and diagnose it; or one scenario of the suite."""
    import shutil

    from gigi import demo as demo_mod
    from gigi import scenarios
    from gigi._output import write_result
    from gigi.ingest import ingest as run_ingest
    from gigi.queries import connect, run, run_named

    if list_:
        for s in scenarios.all_scenarios():
            truth = (
                f"rank 1: {s.truth.failure_mode} on {s.truth.resource}"
                + (f", culprit {s.truth.culprit}..." if s.truth.culprit else "")
                if s.truth
                else "healthy: no finding"
            )
            typer.echo(f"{s.name:24s} {s.title}\n{'':24s} {truth}")
        return
    trace_dir, store = out / "trace", out / "store"
    if trace_dir.exists():
        shutil.rmtree(trace_dir)
    console = _stderr()
    if scenario is not None:
        chosen = scenarios.get(scenario)
        with console.status(f"running scenario {chosen.name}"):
            chosen.run(trace_dir)
    else:
        with console.status(f"running the demo workload for {seconds:g} s"):
            cfg = demo_mod.DemoConfig(seconds=seconds)
            if healthy:
                cfg.long_txn_length = 0.0
            demo_mod.run(trace_dir, cfg)
    with console.status("ingesting"):
        manifest = run_ingest(trace_dir, store)
    entry = store / manifest.trace_id
    typer.echo(f"trace: {trace_dir}  store: {entry}")
    typer.echo(f"{manifest.events:,} events, {manifest.tasks:,} tasks; {_drops_line(manifest)}")
    con = connect(entry, variables={"window_ms": 250})
    if scenario is not None:
        typer.echo("")
        typer.echo(render_diagnosis(entry))
        return
    for name in ("wait_summary", "hold_summary", "outstanding_summary"):
        write_result(run_named(con, name).to_arrow_table(), "table", None, title=name)
    rows = run(
        con,
        "SELECT window_start_ms, tasks_done, per_second FROM (" + _named_sql("throughput") + ")",
    ).fetchall()
    peak = max((r[1] for r in rows), default=1)
    typer.echo("client throughput (transactions per 250 ms):")
    for start, done, _ in rows:
        typer.echo(f"  {start / 1000:6.2f} s {done:6d} {'#' * round(40 * done / peak)}")
    typer.echo("")
    typer.echo(render_diagnosis(entry))
    typer.echo("")
    typer.echo(f'explore: gigi-query sql {entry} "SELECT * FROM holds LIMIT 10"')


WHERE = ("target", "trace", "lake", "engine", "master", "spark_memory", "since", "until")


def _diagnosis(command: str, options: dict, param, **kw):
    """The diagnosis of TARGET (a store or trace directory) or of a trace of --lake, for
    ``command``, whose ``options`` (its arguments by name) hold TARGET, --trace and the lake's
    options (WHERE, and --resource); ``param`` its NAME=VALUE list; ``kw`` as
    ``gigi.diagnosis.diagnose``'s."""
    target, trace, lake, engine, master, spark_memory, since, until = map(options.get, WHERE)
    resource = options.get("resource")
    kw["params"] = {k: _float(k, v) for k, v in _params(param).items()}
    if lake is not None:
        from gigi.lake import diagnose_lake

        if target is not None:
            raise GigiError(f"{command}: give TARGET ({target}) or --lake, not both")
        return diagnose_lake(
            lake,
            trace=trace,
            since=since,
            until=until,
            resources=resource or [],
            engine=engine,
            master=master,
            spark_memory=spark_memory,
            **kw,
        )
    from gigi.diagnosis import diagnose as run_diagnose

    if target is None:
        raise GigiError(f"{command}: give TARGET (a store or trace directory) or --lake LAKE")
    scoped = [f"--{n}" for n, v in (("since", since), ("until", until)) if v is not None]
    scoped += ["--resource"] if resource else []
    if scoped or engine != "duckdb" or master is not None:
        what = ", ".join(scoped + (["--engine"] if engine != "duckdb" else []))
        raise GigiError(f"{command}: {what or '--master'} need(s) --lake (a store is read whole)")
    return run_diagnose(_open(target, trace), **kw)


@app.command(
    epilog="Example: gigi-query diagnose gigi-store --format json   |   "
    "gigi-query diagnose --lake ./lake --trace web-1 --engine spark "
    "--since 2026-12-03T08:00 --until 2026-12-03T09:00"
)
def diagnose(
    target: OptionalTarget = None,
    sites: Annotated[
        Path | None,
        typer.Option(
            help="Sites table (Parquet or Arrow) to name code with, instead of the trace's."
        ),
    ] = None,
    detectors: Annotated[
        list[Path] | None, typer.Option(help="Folder of extra .sql detectors (repeatable).")
    ] = None,
    threshold: Annotated[
        float, typer.Option(help="Report findings scoring at least this (0-1).")
    ] = 0.5,
    format: Annotated[str, typer.Option("--format", "-f", help="text or json.")] = "text",
    output: OutputOpt = None,
    trace: TraceOpt = None,
    param: ParamOpt = None,
    lake: LakeOpt = None,
    engine: EngineOpt = "duckdb",
    master: MasterOpt = None,
    spark_memory: SparkMemoryOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    resource: ResourceOpt = None,
    explain: Annotated[
        str | None,
        typer.Option(
            help="Print every detector's verdict on RESOURCE, with its figures, instead of "
            "the findings.",
            metavar="RESOURCE",
        ),
    ] = None,
    fail_on_findings: Annotated[
        bool,
        typer.Option(
            "--fail-on-findings",
            help="Exit with status 3 when there is a finding or an unexplained wait (for CI).",
        ),
    ] = False,
) -> None:
    """Name the resource, the failure mode, the task to blame and the code: root causes first.

    A resource whose waits behind other tasks are significant (detector parameter min_wait)
    and that no detector accuses is listed as an unexplained wait; with no finding, the
    report names the most waited-for resources and why no detector fired.

    With --lake, only the trace, days and row groups asked for are read (--trace, --since,
    --until, --resource go down into the Parquet scans of either engine)."""
    import json

    from gigi.diagnosis._render import render, render_explain

    if format not in ("text", "json"):
        raise GigiError(f"unknown format {format!r}, expected text or json")
    if not 0 <= threshold <= 1:
        raise GigiError(f"--threshold {threshold:g}: a score threshold is between 0 and 1")
    d = _diagnosis(
        "diagnose", locals(), param, sites=sites, detectors=detectors, threshold=threshold
    )
    if explain is not None:
        from gigi.diagnosis import explain as explain_resource

        doc = explain_resource(d, explain)
        text = json.dumps(doc, indent=2) if format == "json" else render_explain(doc)
    else:
        text = json.dumps(d.to_json(), indent=2) if format == "json" else render(d)
    if output is not None:
        write_atomic(output, text + "\n")
    else:
        typer.echo(text)
    if fail_on_findings and (d.findings or d.unexplained):
        raise typer.Exit(3)


@app.command(
    epilog="Example: gigi-query report gigi-store --html report.html --source ./src   "
    "(then open report.html in a browser)"
)
def report(
    target: OptionalTarget = None,
    *,
    html: Annotated[
        Path, typer.Option(help="Write the page to FILE (one self-contained file).", metavar="FILE")
    ],
    source: Annotated[
        Path | None,
        typer.Option(
            help="Root the sites' relative file paths are relative to: the lines around each "
            "site are copied into the page (so it holds that code). Without it the page says "
            "'source not available'.",
            metavar="DIR",
        ),
    ] = None,
    sites: Annotated[
        Path | None,
        typer.Option(
            help="Sites table (Parquet or Arrow) to name code with, instead of the trace's."
        ),
    ] = None,
    threshold: Annotated[
        float, typer.Option(help="Report findings scoring at least this (0-1).")
    ] = 0.5,
    trace: TraceOpt = None,
    param: ParamOpt = None,
    lake: LakeOpt = None,
    engine: EngineOpt = "duckdb",
    master: MasterOpt = None,
    spark_memory: SparkMemoryOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    resource: ResourceOpt = None,
) -> None:
    """Write the diagnosis as one HTML page: the ranked findings, each with a plot of
    outstanding, waiting and acquire rate over time with the culprits' holds marked, and the
    sites with their code; no network needed to view it.

    With --lake, the findings come from the engine asked for and the plots from DuckDB over
    the same trace, window and resources of the lake."""
    from gigi.report import ReportConfig, render

    if source is not None and not source.is_dir():
        raise GigiError(f"--source {source}: no such directory")
    d = _diagnosis("report", locals(), param, sites=sites, threshold=threshold)
    page = render(d, ReportConfig(source=source))
    write_atomic(html, page)
    typer.echo(f"wrote {html} ({len(page.encode()):,} bytes); findings: {len(d.findings)}")


@app.command(
    epilog="Example: gigi-query export --perfetto trace.json gigi-store   "
    "(then open trace.json in ui.perfetto.dev)"
)
def export(
    target: Target,
    perfetto: Annotated[
        Path,
        typer.Option(
            help="Write a Chrome JSON trace to FILE for ui.perfetto.dev or the Perfetto trace "
            "processor: waits and holds as slices on a track per task, outstanding and "
            "acquires/s as counters per resource, findings as marked intervals.",
            metavar="FILE",
        ),
    ],
    rate_window: Annotated[
        str | None,
        typer.Option(
            help="Window of the acquires/s counters (10ms, 1s); default: the trace's length "
            "/ 200, rounded up to 1, 2 or 5 times a power of ten."
        ),
    ] = None,
    threshold: Annotated[
        float, typer.Option(help="Mark findings scoring at least this (0-1).")
    ] = 0.5,
    trace: TraceOpt = None,
    param: ParamOpt = None,
) -> None:
    """Write a trace and its diagnosis (the same as diagnose's) for another tool to show."""
    from gigi.export import PerfettoConfig, export_perfetto
    from gigi.record._duration import parse_duration

    window = None
    if rate_window is not None:
        window = round(parse_duration(rate_window, "rate-window") * 1e9)
        if window <= 0:
            raise GigiError(f"--rate-window {rate_window!r}: expected more than 0")
    params = {k: _float(k, v) for k, v in _params(param).items()}
    config = PerfettoConfig(rate_window_ns=window, threshold=threshold, params=params)
    s = export_perfetto(_open(target, trace), perfetto, config)
    typer.echo(
        f"wrote {perfetto} ({s.bytes:,} bytes, {s.trace_events:,} trace events): "
        f"{s.wait_slices:,} waits and {s.hold_slices:,} holds on {s.task_tracks:,} task tracks, "
        f"{s.outstanding_samples:,} outstanding and {s.rate_samples:,} acquires/s samples "
        f"({s.rate_window_ns / 1e6:g} ms windows), findings: {s.findings}"
    )


def _float(name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise GigiError(f"--param {name}={value!r}: expected a number") from None


@app.command(epilog="Example: gigi-query scan ./src --out ./sites")
def scan(
    src: Annotated[Path, typer.Argument(help="C/C++ source tree (or one file).")],
    out: Annotated[Path, typer.Option(help="Folder for sites, resources and the report.")],
    compile_commands: Annotated[
        Path | None, typer.Option(help="compile_commands.json with each file's flags.")
    ] = None,
    llm: Annotated[
        str | None, typer.Option(help="'openai': recall by an LLM instead of offline.")
    ] = None,
    model: Annotated[str | None, typer.Option(help="LLM model (or GIGI_LLM_MODEL).")] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint (or OPENAI_BASE_URL).")
    ] = None,
    cache: Annotated[
        Path | None, typer.Option(help="LLM response cache (default OUT/llm-cache).")
    ] = None,
    jobs: Annotated[int | None, typer.Option(help="Parser processes (default: cores).")] = None,
    include: Annotated[
        list[Path] | None,
        typer.Option(
            "--include",
            "-I",
            help="A folder of headers the tree includes but does not hold (a library's, "
            "installed apart); repeatable.",
        ),
    ] = None,
    define: Annotated[
        list[str] | None,
        typer.Option(
            "--define",
            "-D",
            help="A macro the build defines, NAME or NAME=VALUE (HAVE_CONFIG_H); repeatable.",
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="A file or folder of SRC to scan, the rest of the tree there for its "
            "includes (src/backend/storage); repeatable.",
        ),
    ] = None,
) -> None:
    """Find resources and their WAIT/ACQUIRE/USE/RELEASE sites; keep what verification confirms."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from gigi.scan import scan as run_scan
    from gigi.scan import write

    backend = None
    if llm is not None:
        if llm != "openai":
            raise GigiError(f"unknown --llm {llm!r}, expected openai")
        from gigi.scan._llm import LLMBackend

        backend = LLMBackend(
            model=model,
            base_url=base_url,
            cache_dir=cache or out / "llm-cache",
            source_root=src if src.is_dir() else src.parent,
        )
    console = _stderr()
    with Progress(
        TextColumn("parsing"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} files"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("parse", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = run_scan(
            src,
            compile_commands=compile_commands,
            backend=backend,
            jobs=jobs,
            progress=progress,
            include_dirs=include,
            defines=define,
            only=only,
        )
    report = write(result, out)
    st = report["stats"]
    typer.echo(
        f"scanned {st['files']} files, {st['lines']:,} lines, {st['functions']} functions "
        f"(parse {st['parse_s']:.1f} s); {st['diagnostics']} parse diagnostics "
        f"({st['errors']} errors)"
    )
    for e in st.get("commonest_errors", []):
        files = "1 file" if e["files"] == 1 else f"{e['files']} files"
        typer.echo(f"  {e['count']:4d} x {e['message']} (in {files})")
    if any("file not found" in e["message"] for e in st.get("commonest_errors", [])):
        typer.echo(
            "  a header the tree does not hold: run its configure step (which makes config.h\n"
            "  and the like), or pass --compile-commands, or --include and --define as its\n"
            "  build does; what does not parse is not scanned"
        )
    if "llm" in st:
        from gigi.scan._llm import summary_line

        typer.echo(summary_line(st["llm"]))
    typer.echo(
        f"{len(report['resources'])} resources: "
        + ", ".join(r["name"] for r in report["resources"])
    )
    if report["unconfirmed_resources"]:
        typer.echo(
            f"  {len(report['unconfirmed_resources'])} proposed with no verified site, left out: "
            + ", ".join(r["name"] for r in report["unconfirmed_resources"])
        )
    for kind, k in report["kinds"].items():
        typer.echo(
            f"  {kind:8s} {k['candidates']:4d} candidates, {k['verified']:4d} verified, "
            f"{len(k['rejected']):4d} rejected"
        )
    typer.echo(f"wrote {out / 'sites.parquet'}, resources.parquet, candidates.parquet, report.json")


@app.command(epilog="Example: gigi-query instrument ./src --sites ./sites --out ./src-probed")
def instrument(
    src: Annotated[Path, typer.Argument(help="C/C++ source tree that was scanned.")],
    sites: Annotated[Path, typer.Option(help="Scan's OUT folder (sites.parquet, resources).")],
    out: Annotated[Path, typer.Option(help="Empty or new folder for the instrumented copy.")],
    compile_commands: Annotated[
        Path | None, typer.Option(help="compile_commands.json with each file's flags.")
    ] = None,
) -> None:
    """Copy a source tree with native probe calls inserted at the verified sites."""
    from gigi.scan._instrument import instrument as run_instrument

    report = run_instrument(src, sites, out, compile_commands=compile_commands)
    typer.echo(
        f"placed {report['placed']} of {report['sites']} sites in {len(report['files'])} files"
    )
    for s in report["skipped"]:
        typer.echo(f"  skipped site {s['site']} ({s['kind']} {s['file']}:{s['line']}): {s['how']}")
    typer.echo(
        f"wrote {out}; build it with its own build system plus: "
        "CFLAGS $(gigi-query probes cflags), LIBS $(gigi-query probes libs)"
    )


@app.command(epilog="Example: gigi-query validate ./trace --sites ./sites --out ./sites-valid")
def validate(
    trace: Target,
    sites: Annotated[Path, typer.Option(help="Sites table: scan's OUT folder or a .parquet.")],
    out: Annotated[Path, typer.Option(help="Folder for the pruned sites and the report.")],
    min_share: Annotated[
        float | None,
        typer.Option(help="Share of a site's events that must fit a lifecycle (default 0.2)."),
    ] = None,
) -> None:
    """Keep the sites whose events in a run formed a plausible lifecycle; drop the rest."""
    from gigi.scan._validate import read_sites, write
    from gigi.scan._validate import validate as run_validate

    folder = sites if sites.is_dir() else sites.parent
    v = run_validate(trace, read_sites(sites), min_share, folder / "hierarchy" / "calls.parquet")
    write(v, out, sites)
    for kind, k in v.by_kind.items():
        typer.echo(
            f"  {kind:8s} {k['candidates']:4d} candidates, {k['exercised']:4d} exercised, "
            f"{k['removed']:4d} removed as false"
        )
    for r in v.removed():
        typer.echo(f"  removed site {r['site']} ({r['kind']}): {r['reason']}")
    typer.echo(f"wrote {out / 'sites.parquet'} ({v.sites.num_rows} sites), validation.json")


detectors_app = typer.Typer(
    help="The detectors diagnose runs.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(detectors_app, name="detectors")


@detectors_app.command("list", epilog="Example: gigi-query detectors list --detectors ./mine")
def detectors_list(
    detectors: Annotated[
        list[Path] | None, typer.Option(help="Folder of extra .sql detectors (repeatable).")
    ] = None,
) -> None:
    """List every detector with its failure mode, meaning and parameters."""
    from gigi.detectors import load

    for det in load(detectors):
        origin = "built-in" if det.builtin else str(det.path)
        typer.echo(f"{det.name} ({det.failure_mode}; {origin})")
        typer.echo(f"    {det.meaning}")
        for p in det.params.values():
            typer.echo(f"    param {p.name} = {p.default:g}: {p.doc}")


# what a program built with the runtime reads from its environment when it starts
PROBES_ENVIRONMENT = """\b
A program built with the runtime records only when it starts with GIGI_TRACE set:
  GIGI_TRACE=DIR          write the trace (Arrow IPC segments) into DIR
  GIGI_TRACE_ID=ID        the trace's id (default: made from the host, pid and time)
  GIGI_INTERVAL_MS=N      how often the writer drains the rings (200)
  GIGI_RING_RECORDS=N     each thread's ring, in 64-byte records (16384)
  GIGI_BLOCK_MS=N         how long a full ring waits for the writer before it drops an
                          event (0: never waits; negative: as long as the writer runs)
  GIGI_SAMPLE=name=N,...  keep one event in N of a resource
  GIGI_CLOCK=monotonic    stamp with clock_gettime instead of the TSC"""

probes_app = typer.Typer(
    help="The native probe runtime for C and C++ programs.",
    epilog=PROBES_ENVIRONMENT,
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(probes_app, name="probes")


@probes_app.command(
    "cflags", epilog="Example: gigi-query probes cflags   (cc $(gigi-query probes cflags) -c app.c)"
)
def probes_cflags() -> None:
    """Print the flags that compile code including gigi_probe.h."""
    from gigi.probes import native

    typer.echo(" ".join(native.cflags()))


@probes_app.command(
    "libs", epilog="Example: gigi-query probes libs   (cc app.o $(gigi-query probes libs) -o app)"
)
def probes_libs(
    out: Annotated[
        Path | None,
        typer.Option(help="Build the static library here (default: the user's cache)."),
    ] = None,
) -> None:
    """Build the runtime's static library with the C compiler (once) and print the flags
    that link a program with it."""
    from gigi.probes import native

    typer.echo(" ".join(native.libs(out)))


record_app = typer.Typer(
    help="Record a running server's own resource state as a trace (format v1).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(record_app, name="record")

# what every recorder takes besides its DSN
RecordOut = Annotated[Path, typer.Option(help="Trace directory to write (created if missing).")]
RecordDuration = Annotated[
    str, typer.Option(help="How long to record (30s, 2m); Ctrl-C or SIGTERM end it sooner.")
]
RecordInterval = Annotated[
    str,
    typer.Option(help="Time between polls; a lock held or waited for less may go unseen."),
]


@record_app.command(
    "postgres",
    epilog="Example: gigi-query record postgres --dsn postgresql://postgres@localhost/app "
    "--duration 30s --out ./trace",
)
def record_postgres(
    dsn: Annotated[
        str,
        typer.Option(
            help="libpq connection string or URI; the role needs pg_read_all_stats (or "
            "superuser) to see other sessions. Their SQL text goes into the trace."
        ),
    ],
    out: RecordOut,
    duration: RecordDuration = "30s",
    interval: RecordInterval = "10ms",
) -> None:
    """Poll PostgreSQL's pg_stat_activity, pg_locks and dead tuples and write them as a
    trace: transactions are tasks, locks and dead tuples resources."""
    from gigi.record._duration import parse_duration
    from gigi.record.postgres import PostgresRecording, record

    config = PostgresRecording(
        dsn=dsn,
        out=out,
        duration_s=parse_duration(duration, "duration"),
        interval_s=parse_duration(interval, "interval"),
    )
    summary = record(config)
    per_poll = 1000 * summary.poll_s / max(summary.polls, 1)
    typer.echo(
        f"{summary.polls} polls in {summary.seconds:.1f} s ({per_poll:.2f} ms each), "
        f"{summary.events} events, {summary.segments} segments in {out}"
    )


@record_app.command(
    "mariadb",
    epilog="Example: gigi-query record mariadb --dsn mysql://root@127.0.0.1:3306/test "
    "--duration 30s --interval 10ms --out ./trace",
)
def record_mariadb(
    dsn: Annotated[
        str,
        typer.Option(
            help="mysql://user:password@host:port/db (or mariadb://; ?unix_socket=PATH). The "
            "user needs SELECT and UPDATE on performance_schema, and PROCESS for row locks."
        ),
    ],
    out: RecordOut,
    duration: RecordDuration = "30s",
    interval: RecordInterval = "10ms",
) -> None:
    """Poll a MariaDB or MySQL server's performance_schema (metadata locks, waits, statements,
    transactions, threads) and InnoDB lock waits, and write them as a trace: locks become
    resources, connections, transactions and statements tasks named by their SQL."""
    import signal
    import threading

    from gigi.record._duration import parse_duration
    from gigi.record.mariadb import record

    seconds, every = parse_duration(duration, "duration"), parse_duration(interval, "interval")
    stop = threading.Event()
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        console = _stderr()
        rec = record(
            dsn,
            out,
            duration=seconds,
            interval=every,
            stop=stop,
            on_start=lambda: console.print(
                f"recording for {seconds:g} s every {every * 1000:g} ms into {out} (Ctrl-C stops)",
                highlight=False,
            ),
        )
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    for note in rec.notes:
        print(f"gigi-query: note: {note}", file=sys.stderr)
    ms = rec.figures()
    typer.echo(
        f"recorded {rec.server} ({rec.version}) for {rec.seconds:.1f} s: {rec.polls:,} polls "
        f"(mean {ms['mean']:.2f} ms, p99 {ms['p99']:.2f} ms), {rec.events:,} events, "
        f"{rec.tasks:,} tasks into {out}"
    )
    typer.echo(f"row locks: {rec.row_locks}")


def render_diagnosis(entry) -> str:
    from gigi.diagnosis import diagnose as run_diagnose
    from gigi.diagnosis._render import render

    return render(run_diagnose(entry))


def _named_sql(name: str) -> str:
    from gigi.queries import named_queries

    return named_queries()[name].text.rstrip().rstrip(";")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; library errors become one line on stderr and exit status 2; Ctrl-C exits
    with 130 and SIGTERM with 143, each after cleaning up, with one line: "interrupted"."""
    with handling() as received:
        try:
            code = _main(argv)
        except BaseException:  # an interrupt while an error was being reported
            if not received:
                raise
    if received:
        # Whatever the interrupt broke on its way out (a query stopped, an import cut
        # short, an error from either) is its doing: one line, and the signal's exit status.
        print("gigi-query: interrupted", file=sys.stderr)
        return 128 + received[0]
    return code


def _main(argv: list[str] | None) -> int:
    try:
        app(args=argv, prog_name="gigi-query")
    except SystemExit as e:  # typer's own exits: --help, usage errors (already reported)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except KeyboardInterrupt:
        if not received:  # raised where our handler was not in place
            received.append(2)
        return 130
    except Exception:
        if received:
            return 128 + received[0]  # main() says so
        return _reported()
    return 0


def _reported() -> int:
    """The exit status of the error being handled, reported in one line."""
    try:
        raise
    except GigiError as e:
        print(f"gigi-query: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as e:
        print(
            f"gigi-query: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "),
            file=sys.stderr,
        )
        return 1
    except Exception as e:  # noqa: BLE001 - one line, never a traceback, unless asked
        refused = _duckdb_user_error(e)
        if refused is not None:
            print(f"gigi-query: error: {refused}", file=sys.stderr)
            return 2
        if os.environ.get("GIGI_DEBUG"):
            raise
        print(
            f"gigi-query: internal error: {type(e).__name__}: {e} "
            "(set GIGI_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 1
    return 0


def _duckdb_user_error(e: Exception) -> str | None:
    """The one line for an error DuckDB raised while a query ran or its rows were fetched (a
    function refused, ``error('boom')``, a value out of range), or None when it is not one.
    Only DuckDB's own internal and fatal errors stay internal. DuckDB is looked up, not
    imported: a command that never imported it cannot have raised its errors."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is None or not isinstance(e, duckdb.Error):
        return None
    if isinstance(e, duckdb.InternalError | duckdb.FatalException):
        return None
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, duckdb.PermissionException):
        return f"refused: queries may read only the trace's own tables ({first})"
    return first


def entry() -> None:
    """The ``gigi-query`` process (see ``gigi._entry``)."""
    from gigi._entry import entry as run

    run()


if __name__ == "__main__":
    entry()
