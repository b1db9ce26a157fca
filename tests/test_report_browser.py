"""The HTML report as a browser shows it: pages rendered by headless Chromium (Debian's
package, installed when missing), their DOM read back and checked against the store.

Each page is recorded, diagnosed, rendered and loaded once per module; the tests only read
the DOMs, so after the install the browser costs a few seconds."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest

import gigi.probes as gp
from gigi import scenarios
from gigi.diagnosis import diagnose
from gigi.ingest import ingest
from gigi.queries import connect
from gigi.report import ReportConfig, render
from gigi.report._data import SERIES
from tests.conftest import events, write_stream

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# the task name of the culprit in the page that must not run it
PAYLOAD = 'SELECT \'<script>document.documentElement.setAttribute("data-pwned", "1")</script>\''
SOURCE = {
    "app/db.py": [
        "class Table:",
        "    def lock(self):",
        "        self.mutex.acquire()  # the culprit's ACQUIRE",
        "        return self",
        "",
        "    def wait(self):",
        "        self.mutex.wait()  # where the INSERTs wait",
        "",
    ]
}


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not CHROMIUM.exists():
        if os.geteuid() != 0:
            pytest.skip("chromium is not installed and installing it needs root")
        from tests.debian import apt_install

        err = apt_install("chromium")
        assert CHROMIUM.exists(), f"could not install chromium: {err}"
    return CHROMIUM


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find(self, tag: str | None = None, cls: str | None = None, **attrs) -> list[Node]:
        return [
            n
            for n in self.iter()
            if (tag is None or n.tag == tag)
            and (cls is None or cls in (n.attrs.get("class") or "").split())
            and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]


class _Builder(HTMLParser):
    VOID = {"meta", "link", "br", "img", "input", "hr", "source", "col", "wbr", "area", "base"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.at = Node("#document", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.at)
        self.at.children.append(node)
        if tag not in self.VOID:
            self.at = node

    def handle_startendtag(self, tag, attrs):
        self.at.children.append(Node(tag, dict(attrs), self.at))

    def handle_endtag(self, tag):
        n = self.at
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.at = n.parent

    def handle_data(self, data):
        self.at.children.append(data)


def load(chromium: Path, page: Path, profile: Path) -> Node:
    """The DOM Chromium built from the page, after it loaded (and ran whatever it would run)."""
    out = subprocess.run(
        [str(chromium), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "<html" in out.stdout, out.stderr[-2000:]
    builder = _Builder()
    builder.feed(out.stdout)
    return builder.root


def _page(d, tmp: Path, config: ReportConfig | None = None) -> Path:
    page = tmp / "report.html"
    page.write_text(render(d, config))
    return page


@pytest.fixture(scope="module")
def contention(chromium, tmp_path_factory):
    """A scenario of the suite, with its ground truth."""
    scenario = scenarios.get("mdev-34989")
    tmp = tmp_path_factory.mktemp("contention")
    scenario.run(tmp / "trace")
    entry = tmp / "store" / ingest(tmp / "trace", tmp / "store").trace_id
    d = diagnose(entry)
    return scenario, entry, d.to_json(), load(chromium, _page(d, tmp), tmp / "profile")


def _blocking_workload() -> None:
    """One query with markup in its name keeps a lock while INSERTs wait, at known sites."""
    lock = gp.resource("app.table_lock", unit="locks", sharing="exclusive")
    acquire_site = gp.site("app/db.py", 3, "Table.lock", "ACQUIRE", "app.table_lock")
    wait_site = gp.site("app/db.py", 7, "Table.wait", "WAIT", "app.table_lock")
    outside_site = gp.site("../secret.py", 1, "elsewhere", "RELEASE", "app.table_lock")
    mutex, held = threading.Lock(), threading.Event()

    def culprit():
        with gp.task(PAYLOAD):
            mutex.acquire()
            lock.acquire(1, site=acquire_site)
            held.set()
            time.sleep(0.4)
            lock.release(1, site=outside_site)
            mutex.release()

    def victim(n):
        held.wait()
        with gp.task(f"INSERT INTO t #{n}"):
            with lock.wait(1, site=wait_site):
                mutex.acquire()
            lock.acquire(1)
            lock.release(1)
            mutex.release()

    threads = [threading.Thread(target=culprit)] + [
        threading.Thread(target=victim, args=(n,)) for n in range(5)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@pytest.fixture(scope="module")
def blocking(chromium, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("blocking")
    src = tmp / "src"
    for name, lines in SOURCE.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text("\n".join(lines) + "\n")
    gp.enable(tmp / "trace", interval=0.2)
    try:
        _blocking_workload()
    finally:
        gp.disable()
    entry = tmp / "store" / ingest(tmp / "trace", tmp / "store").trace_id
    d = diagnose(entry)
    dom = load(chromium, _page(d, tmp, ReportConfig(source=src)), tmp / "profile")
    return entry, d.to_json(), dom


@pytest.fixture(scope="module")
def healthy(chromium, tmp_path_factory):
    """Two resources, each held briefly now and then by one task: nothing to find."""
    tmp = tmp_path_factory.mktemp("healthy")
    n = 40
    ts = [t for i in range(n) for t in (i * 1_000_000, i * 1_000_000 + 100_000)]
    write_stream(
        tmp / "e.arrows",
        events(
            ts=ts + [t + 500_000 for t in ts],
            kind=["ACQUIRE", "RELEASE"] * (2 * n),
            resource=["pool.a"] * (2 * n) + ["pool.b"] * (2 * n),
            task=pa.array([1] * (2 * n) + [2] * (2 * n), pa.int64()),
        ),
    )
    entry = tmp / "store" / ingest(tmp, tmp / "store").trace_id
    d = diagnose(entry)
    return entry, d.to_json(), load(chromium, _page(d, tmp), tmp / "profile")


def _trace_range(entry: Path) -> tuple[int, int]:
    return connect(entry).execute('SELECT start, "end" FROM trace_info').fetchone()


def test_findings_appear_in_rank_order_with_the_truth_first(contention):
    scenario, _, result, dom = contention
    sections = dom.find("section", "finding")
    assert [
        (int(s.attrs["data-rank"]), s.attrs["data-resource"], s.attrs["data-failure-mode"])
        for s in sections
    ] == [(f["rank"], f["resource"], f["failure_mode"]) for f in result["findings"]]
    first = sections[0]
    heading = first.find("h2")[0].text()
    assert scenario.truth.resource in heading and scenario.truth.failure_mode in heading
    culprit = first.find("li", "culprit")[0].text()
    assert culprit.startswith(scenario.truth.culprit), culprit
    summary = dom.find("dl", "summary")[0]
    assert summary.find("dd", "trace")[0].text() == result["trace"]
    assert summary.find("dd", "events")[0].text() == f"{result['events']:,}"
    assert summary.find("dd", "dropped")[0].text().startswith(f"{result['dropped']:,} events")


def test_one_plot_per_finding_with_its_three_series(contention):
    _, entry, result, dom = contention
    start, end = _trace_range(entry)
    for section in dom.find("section", "finding"):
        (svg,) = section.find("svg", "plot")
        assert svg.attrs["data-resource"] == section.attrs["data-resource"]
        assert (int(svg.attrs["data-start-ns"]), int(svg.attrs["data-end-ns"])) == (start, end)
        assert [g.attrs["data-series"] for g in svg.find("g", "series")] == list(SERIES)
        peak = (
            connect(entry)
            .execute(
                "SELECT max(outstanding) FROM outstanding WHERE resource = ?",
                [section.attrs["data-resource"]],
            )
            .fetchone()[0]
        )
        plotted = {
            g.attrs["data-series"]: float(g.attrs["data-peak"])
            for g in svg.find("g")
            if "data-peak" in g.attrs
        }
        assert 0 < plotted["outstanding"] <= peak  # a mean over windows of the running level
        if section.attrs["data-failure-mode"] == "contention":
            assert plotted["waiting"] > 0


def _marked_span(svg: Node, task: int) -> tuple[float, float]:
    marks = svg.find("rect", "culprit-mark", data_task=str(task))
    assert marks, f"no mark of culprit {task}"
    return (
        min(float(m.attrs["x"]) for m in marks),
        max(float(m.attrs["x"]) + float(m.attrs["width"]) for m in marks),
    )


def _expected_span(entry: Path, svg: Node, task: int, resource: str) -> tuple[float, float]:
    """Where the culprit's holds lie on the plot's time axis, from the store's holds."""
    start, end = _trace_range(entry)
    first, last = (
        connect(entry)
        .execute(
            "SELECT min(acquire_ts), max(acquire_ts + hold_ns) FROM holds "
            "WHERE task = ? AND resource = ?",
            [task, resource],
        )
        .fetchone()
    )
    left, right = float(svg.attrs["data-x-left"]), float(svg.attrs["data-x-right"])
    return tuple(left + (t - start) / (end - start) * (right - left) for t in (first, last))


@pytest.mark.parametrize("case", ["contention", "blocking"])
def test_the_culprits_holds_are_marked_where_they_were(case, request):
    entry, result, dom = request.getfixturevalue(case)[-3:]
    top = result["findings"][0]
    (svg,) = dom.find("section", "finding", data_rank="1")[0].find("svg", "plot")
    culprit = top["culprit_tasks"][0]
    x0, x1 = _marked_span(svg, culprit)
    e0, e1 = _expected_span(entry, svg, culprit, top["resource"])
    assert x0 == pytest.approx(e0, abs=1.0) and x1 == pytest.approx(max(e1, e0 + 1.5), abs=1.0)
    assert x1 - x0 > 10  # the hold spans most of the trace: a visible band, not a hairline


def test_a_task_name_with_a_script_is_text_not_code(blocking):
    _, result, dom = blocking
    (html,) = dom.find("html")
    assert "data-pwned" not in html.attrs
    assert dom.find("script") == []
    culprits = [li.text() for li in dom.find("li", "culprit")]
    assert any(PAYLOAD in text for text in culprits), culprits
    assert result["findings"][0]["failure_mode"] == "contention"


def test_sites_show_their_code_from_the_source_root(blocking):
    _, result, dom = blocking
    section = dom.find("section", "finding", data_rank="1")[0]
    shown = {(s.attrs["data-role"], s.attrs["data-kind"]): s for s in section.find("div", "site")}
    for site in result["findings"][0]["sites"]:
        div = shown[(site["role"], site["kind"])]
        lines = SOURCE.get(site["file"])
        if lines is None:  # the RELEASE site names a file outside the root: not read
            assert "outside the source root" in div.find("p", "source-missing")[0].text()
            continue
        (here,) = div.find("span", "here")
        assert here.text().split(maxsplit=1) == [
            str(site["line"]),
            lines[site["line"] - 1].strip(),
        ]
    assert ("culprit", "ACQUIRE") in shown and ("victim", "WAIT") in shown


@pytest.mark.parametrize("case", ["contention", "blocking", "healthy"])
def test_nothing_leaves_the_page(case, request):
    dom = request.getfixturevalue(case)[-1]
    for node in dom.iter():
        for name in ("src", "href", "action", "srcset", "poster", "data", "xlink:href"):
            value = (node.attrs.get(name) or "").strip().lower()
            assert not value or value.startswith("#"), (node.tag, name, value)
        assert node.tag not in ("script", "iframe", "object", "embed", "link", "img")
    (csp,) = dom.find("meta", http_equiv="Content-Security-Policy")
    assert "default-src 'none'" in csp.attrs["content"]


def test_a_healthy_trace_says_so_and_still_plots_its_resources(healthy):
    entry, result, dom = healthy
    assert result["findings"] == []
    assert dom.find("section", "finding") == []
    assert "No findings" in dom.find("p", "no-findings")[0].text()
    resources = {
        r for (r,) in connect(entry).execute("SELECT DISTINCT resource FROM events").fetchall()
    }
    sections = dom.find("section", "resource")
    assert {s.attrs["data-resource"] for s in sections} == resources
    for s in sections:
        (svg,) = s.find("svg", "plot")
        assert len(svg.find("g", "series")) == len(SERIES)
        assert svg.find("rect", "culprit-mark") == []
