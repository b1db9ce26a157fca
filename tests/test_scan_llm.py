"""The LLM path when the endpoint misbehaves, over real HTTP against a loopback server: every
answer is checked before it is used or cached (a cached one again before it is reused),
Retry-After is honoured, and the scan's summary counts what failed; what the LLM could not
answer is left to the offline rules."""

import json
import threading
import time
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gigi.cli import main
from gigi.scan import scan, write
from gigi.scan._llm import LLMBackend, retry_after_s

CONN_POOL = Path(__file__).parent / "scan_corpus" / "conn_pool.c"
ABSURD = 2**40  # the line one real answer gave

EVENTS = {
    "pool_checkout": [
        {"kind": "WAIT", "line": 27, "object": "", "amount": "1", "why": "cond wait loop"},
        {"kind": "ACQUIRE", "line": 32, "object": "c", "amount": "1", "why": "pops idle"},
    ],
    "pool_checkin": [
        {"kind": "RELEASE", "line": 43, "object": "c", "amount": "1", "why": "pushes back"}
    ],
    "conn_query": [{"kind": "USE", "line": 50, "object": "c", "why": "queries through c"}],
}


def good(request: dict) -> dict:
    if "record" in request:
        if request["record"] != "conn_pool":
            return {"resource": False}
        return {"resource": True, "sharing": "pool", "unit": "connections", "objects": ["conn"]}
    return {"events": EVENTS.get(request["function"], [])}


class Endpoint:
    """An OpenAI-compatible chat endpoint on loopback. ``reply(request, n)`` decides each
    answer, n counting the requests so far for that record or function: a dict (the
    answer's JSON), or (status, headers) for an error."""

    def __init__(self, reply):
        self.reply = reply
        self.seen: list[tuple[float, str]] = []  # (when, record or function)
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = json.loads(body["messages"][1]["content"])
                what = request.get("record") or request.get("function")
                n = sum(w == what for _, w in endpoint.seen)
                endpoint.seen.append((time.monotonic(), what))
                answer = endpoint.reply(request, n)
                if isinstance(answer, tuple):
                    status, headers = answer
                    data = json.dumps({"error": {"message": "no", "type": "x"}}).encode()
                else:
                    status, headers = 200, {}
                    message = {"role": "assistant", "content": json.dumps(answer)}
                    data = json.dumps(
                        {
                            "id": "x",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body["model"],
                            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                        }
                    ).encode()
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        serve = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        serve.start()

    def asked(self, what: str) -> int:
        return sum(w == what for _, w in self.seen)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint():
    made = []

    def start(reply):
        made.append(Endpoint(reply))
        return made[-1]

    yield start
    for e in made:
        e.close()


def backend(url: str, cache: Path, **kw) -> LLMBackend:
    kw = {"retries": 1, "rate_per_s": 0, "timeout": 5.0} | kw
    return LLMBackend(
        model="fake-1",
        base_url=url,
        api_key="k",
        cache_dir=cache,
        source_root=CONN_POOL.parent,
        **kw,
    )


def sites(result) -> set:
    return {(c.function, c.kind, c.line) for c in result.verified()}


def test_an_absurd_line_is_malformed_not_cached_and_asked_again(endpoint, tmp_path):
    def reply(request, n):
        if request.get("function") == "pool_checkout":
            return {"events": [{"kind": "WAIT", "line": ABSURD, "why": "?"}]}
        return good(request)

    server = endpoint(reply)
    b = backend(server.url, tmp_path / "cache")
    result = scan(CONN_POOL, backend=b, jobs=1)
    report = write(result, tmp_path / "out")  # the scan and its tables get written
    llm = report["stats"]["llm"]
    assert llm["phase2"]["malformed"] == 1 and llm["total"]["malformed"] == 1
    assert llm["total"]["failed"] == 0
    assert "pool_checkout" in llm["phase2"]["rejected_answers"][0]
    assert str(ABSURD) in llm["phase2"]["rejected_answers"][0]
    assert server.asked("pool_checkout") == 2  # the answer and its one retry
    assert not any(str(ABSURD) in p.read_text() for p in (tmp_path / "cache").iterdir())
    # the offline rules stand in for the function the LLM could not describe
    origins = {(c.function, c.origin) for c in result.verified()}
    assert ("pool_checkout", "heuristic") in origins and ("pool_checkin", "llm") in origins
    assert max(pq.read_table(tmp_path / "out" / "sites.parquet")["line"].to_pylist()) < 60

    again = backend(server.url, tmp_path / "cache")
    scan(CONN_POOL, backend=again, jobs=1)
    assert server.asked("pool_checkout") == 4  # asked again, not answered from the cache
    assert server.asked("pool_checkin") == 1  # the good answers were cached
    assert again.report()["total"]["malformed"] == 1


def test_retry_after_is_honoured(endpoint, tmp_path):
    def reply(request, n):
        if request.get("record") == "conn_pool" and n == 0:
            return 429, {"Retry-After": "2"}
        return good(request)

    server = endpoint(reply)
    b = backend(server.url, tmp_path / "cache", retries=2)
    result = scan(CONN_POOL, backend=b, jobs=1)
    first, second = [t for t, w in server.seen if w == "conn_pool"]
    assert 1.8 <= second - first < 4.0, second - first
    assert b.report()["total"] == {
        "calls": len(server.seen),
        "cached": 0,
        "failed": 0,
        "malformed": 0,
        "cache_dropped": 0,
    }
    assert ("pool_checkout", "ACQUIRE", 32) in sites(result)


def test_retry_after_beyond_the_retry_budget_is_not_waited_for(endpoint, tmp_path):
    server = endpoint(lambda request, n: (503, {"Retry-After": "30"}))
    b = backend(server.url, tmp_path / "cache", retries=3, retry_budget_s=1.0)
    t = time.monotonic()
    scan(CONN_POOL, backend=b, jobs=1)
    assert time.monotonic() - t < 10.0
    assert all(server.asked(w) == 1 for _, w in server.seen)  # no retry: it would wait 30 s
    assert b.report()["total"]["failed"] == len(server.seen)


def test_retry_after_in_seconds_or_as_a_date():
    now = time.time()
    assert retry_after_s("2", now) == 2.0
    assert retry_after_s("0.5", now) == 0.5
    assert retry_after_s("86400", now) == 60.0  # capped
    assert retry_after_s(format_datetime_utc(now + 7), now) == pytest.approx(7, abs=1)
    assert retry_after_s(format_datetime_utc(now - 7), now) == 0.0  # already past
    for bad in ("", "soon", "nan", "inf", "-3"):
        assert retry_after_s(bad, now) is None, bad


def format_datetime_utc(t: float) -> str:
    return format_datetime(datetime.fromtimestamp(int(t), UTC), usegmt=True)


def test_a_dead_endpoint_leaves_the_offline_results_and_says_so(
    endpoint, tmp_path, monkeypatch, capsys
):
    server = endpoint(lambda request, n: (500, {}))

    class Quick(LLMBackend):  # the command's backend with fewer retries and no rate limit
        def __init__(self, **kw):
            super().__init__(**kw, retries=1, rate_per_s=0, timeout=5.0)

    monkeypatch.setattr("gigi.scan._llm.LLMBackend", Quick)
    argv = ["scan", str(CONN_POOL), "--out", str(tmp_path / "out"), "--llm", "openai"]
    assert main([*argv, "--model", "m", "--base-url", server.url]) == 0
    printed = capsys.readouterr().out
    questions = len({w for _, w in server.seen})
    assert questions >= 5 and len(server.seen) == 2 * questions  # each asked, retried once
    assert f"{questions} failed" in printed and "incomplete" in printed, printed
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["stats"]["llm"]["total"]["failed"] == questions
    offline = scan(CONN_POOL, jobs=1)
    got = pq.read_table(tmp_path / "out" / "sites.parquet").to_pylist()
    assert {(s["function"], s["kind"], s["line"]) for s in got} == sites(offline)
    assert {s["origin"] for s in got} == {"heuristic"}


def test_a_clean_llm_scan_says_so(endpoint, tmp_path, capsys):
    server = endpoint(lambda request, n: good(request))
    argv = ["scan", str(CONN_POOL), "--out", str(tmp_path / "out"), "--llm", "openai"]
    assert main([*argv, "--model", "m", "--base-url", server.url]) == 0
    printed = capsys.readouterr().out
    assert f"{len(server.seen)} calls" in printed and "0 failed, 0 malformed" in printed
    assert "incomplete" not in printed


def test_a_poisoned_cache_entry_is_dropped_and_asked_again(endpoint, tmp_path):
    server = endpoint(lambda request, n: good(request))
    cache = tmp_path / "cache"
    first = scan(CONN_POOL, backend=backend(server.url, cache), jobs=1)
    asked = len(server.seen)
    # what the old code cached: it checked only that a line was an integer
    checkout = next(p for p in cache.iterdir() if '"pops idle"' in p.read_text())
    checkout.write_text(json.dumps({"events": [{"kind": "WAIT", "line": ABSURD}]}))
    checkin = next(p for p in cache.iterdir() if '"pushes back"' in p.read_text())
    checkin.write_text('{"events": [{"kind": "RELEA')  # cut short
    b = backend(server.url, cache)
    again = scan(CONN_POOL, backend=b, jobs=1)
    write(again, tmp_path / "out")
    assert len(server.seen) == asked + 2
    assert server.asked("pool_checkout") == 2 and server.asked("pool_checkin") == 2
    assert b.report()["total"]["cache_dropped"] == 2
    assert b.report()["total"]["cached"] == asked - 2
    assert sites(again) == sites(first)
    assert '"pops idle"' in checkout.read_text()  # the good answer cached in its place
