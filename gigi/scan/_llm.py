"""The LLM recall, through the official ``openai`` client against any OpenAI-compatible
endpoint. Nothing is sent unless an endpoint is configured; the key is never logged.

Phase 1 sends each record's declaration (name, members with types, comment) and asks whether
it is a resource; phase 2 sends each function that touches a resource (signature, facts and
source) and asks for its events. Answers must be JSON of a fixed shape (asked for with
``response_format``, and checked by ``_answers`` before they are used or cached: types, line
numbers inside the file, known kinds, sane lengths); a malformed answer is retried, then
dropped with its reason. Responses are cached by the SHA-256 of the model and the request, so
a re-scan of unchanged code sends nothing and repeats exactly; a cached answer is checked
again before it is reused, and one that fails (cached by an older gigi) is dropped and asked
again. Calls are rate-limited and bounded by a timeout; a failed call is retried after the
wait a 429 or 503 asks for in ``Retry-After`` (at most a minute), else with exponential
backoff, and all the waits of a scan share one budget. A record or function the LLM gave no
usable answer for, failed or malformed, is left to the offline rules, and the report counts
both.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC
from email.utils import parsedate_to_datetime
from pathlib import Path

from gigi.scan import _offline
from gigi.scan._answers import check_phase1, check_phase2
from gigi.scan._offline import Candidate, ResourceGuess, members_by_record
from gigi.scan._parse import Function, Member, Record, ScanError

# the longest wait a Retry-After gets: a server asking for more is not waited for longer
RETRY_AFTER_MAX_S = 60.0
# what stood in for an answer the LLM did not give, in a resource's reasons
OFFLINE_STANDS_IN = "offline rules: the LLM gave no usable answer"

PHASE1_PROMPT = (
    "You classify C/C++ records. An application resource is something a program hands out "
    "and takes back or waits for: a buffer pool, free list, connection pool, cache, log with "
    "truncation, slot array, lock table. Settings, statistics and wrappers are not. Answer "
    'JSON: {"resource": bool, "sharing": "exclusive|shared|pool|log", "unit": str, '
    '"objects": [record names it hands out], "why": str}.'
)
PHASE2_PROMPT = (
    "You find resource events in one C/C++ function. Kinds: WAIT (a slow path to get the "
    "resource: a loop that blocks, sleeps, retries or evicts), ACQUIRE (it takes units and "
    "hands out what it took), USE (it works through an object of the resource), RELEASE (it "
    'gives units back). Answer JSON: {"events": [{"kind": "WAIT|ACQUIRE|USE|RELEASE", '
    '"line": int, "object": "expression or empty", "amount": "expression or 1", '
    '"why": str}]}. Lines are the file\'s own line numbers. An empty list is a fine answer.'
)


class LLMError(ScanError):
    """A configuration the LLM backend cannot run with."""


@dataclass
class PhaseStats:
    calls: int = 0  # requests sent, retries included
    cached: int = 0  # questions answered from the cache
    failed: int = 0  # questions given up after HTTP or network errors
    malformed: int = 0  # questions given up after answers the check refused
    cache_dropped: int = 0  # cached answers the check refused: dropped, asked again
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    retry_wait_s: float = 0.0  # time waited before retries
    rejected: list[str] = field(default_factory=list)  # each question given up, and why


class _RateLimit:
    def __init__(self, per_second: float) -> None:
        self.gap = 1.0 / per_second if per_second > 0 else 0.0
        self.next = 0.0
        self.lock = threading.Lock()

    def wait(self) -> None:
        with self.lock:
            now = time.monotonic()
            if now < self.next:
                time.sleep(self.next - now)
            self.next = max(now, self.next) + self.gap


class LLMBackend:
    """Phase 1 and 2 by an LLM. ``base_url``, ``model`` and ``api_key`` come from the
    arguments, else ``OPENAI_BASE_URL``, ``GIGI_LLM_MODEL``, ``OPENAI_API_KEY``. A question
    is tried ``retries`` more times after a failed or malformed answer; ``retry_budget_s`` is
    how long the whole scan may wait before retries, after which a question gets one try."""

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        cache_dir: str | os.PathLike | None = None,
        timeout: float = 60.0,
        retries: int = 3,
        rate_per_s: float = 5.0,
        retry_budget_s: float = 600.0,
        source_root: str | os.PathLike | None = None,
    ) -> None:
        self.model = model or os.environ.get("GIGI_LLM_MODEL") or ""
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or ""
        key = api_key or os.environ.get("OPENAI_API_KEY") or ""
        if not self.base_url:
            raise LLMError("the LLM backend needs an endpoint: --base-url or OPENAI_BASE_URL")
        if not self.model:
            raise LLMError("the LLM backend needs a model: --model or GIGI_LLM_MODEL")
        from openai import OpenAI

        # max_retries=0: the retries, their waits (Retry-After included) and their budget are
        # ours, in _ask alone, so that they are counted
        self.client = OpenAI(
            base_url=self.base_url, api_key=key or "unused", timeout=timeout, max_retries=0
        )
        self.retries = retries
        self.retry_budget_left = retry_budget_s
        self.limit = _RateLimit(rate_per_s)
        self.cache = Path(cache_dir) if cache_dir else None
        if self.cache:
            self.cache.mkdir(parents=True, exist_ok=True)
        self.root = Path(source_root) if source_root else None
        self.files: dict[str, list[str] | None] = {}
        self.stats = {"phase1": PhaseStats(), "phase2": PhaseStats()}

    def __repr__(self) -> str:  # the key stays out of any log
        return f"LLMBackend(model={self.model!r}, base_url={self.base_url!r})"

    # the two phases

    def resources(self, records: list[Record], members: list[Member]) -> list[ResourceGuess]:
        by_record = members_by_record(members)
        out = []
        for r in records:
            ms = by_record.get(r.name, [])
            decl = {
                "record": r.name,
                "kind": r.kind,
                "comment": r.comment,
                "members": [{"name": m.name, "type": m.type, "comment": m.comment} for m in ms],
            }
            answer = self._ask("phase1", PHASE1_PROMPT, decl, check_phase1, f"record {r.name}")
            if answer is None:
                out += [
                    replace(g, reasons=[*g.reasons, OFFLINE_STANDS_IN])
                    for g in _offline.phase1([r], ms)
                ]
                continue
            if not answer["resource"]:
                continue
            known = {x.name for x in records}
            objects = [o for o in answer.get("objects", []) if o in known and o != r.name]
            out.append(
                ResourceGuess(
                    r.name,
                    r.file,
                    r.line,
                    answer["sharing"],
                    answer["unit"],
                    objects,
                    1.0,
                    [answer.get("why", "")],
                    [],
                )
            )
        for g in out:
            g.members = [m for rec in [g.name, *g.elements] for m in by_record.get(rec, [])]
        return out

    def events(self, fn: Function, resource: str, guess: ResourceGuess) -> list[Candidate]:
        request = {
            "function": fn.name,
            "file": fn.file,
            "lines": [fn.line, fn.end_line],
            "resource": resource,
            "objects": guess.elements,
            "source": self._source(fn),
        }
        lines = self._lines(fn.file)
        # without the file, the function's own end bounds the lines an answer may give
        count = len(lines) if lines is not None else fn.end_line
        answer = self._ask(
            "phase2",
            PHASE2_PROMPT,
            request,
            lambda a: check_phase2(a, count),
            f"function {fn.name}",
        )
        if answer is None:
            return _offline.phase2(fn, resource, guess)
        return [
            Candidate(
                fn.file,
                str(e.get("function") or fn.name),
                int(e["line"]),
                e["kind"],
                resource,
                str(e.get("object") or ""),
                str(e.get("amount") or "1"),
                "llm",
                str(e.get("why") or ""),
            )
            for e in answer["events"]
        ]

    def report(self) -> dict:
        """Per phase and in total: requests sent, questions answered from the cache, given
        up as failed or malformed (each left to the offline rules), cached answers dropped."""
        phases = {
            phase: {
                "calls": s.calls,
                "cached": s.cached,
                "failed": s.failed,
                "malformed": s.malformed,
                "cache_dropped": s.cache_dropped,
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.completion_tokens,
                "seconds": round(s.seconds, 3),
                "retry_wait_s": round(s.retry_wait_s, 3),
                "rejected_answers": s.rejected,
            }
            for phase, s in self.stats.items()
        }
        counts = ("calls", "cached", "failed", "malformed", "cache_dropped")
        return {**phases, "total": {k: sum(p[k] for p in phases.values()) for k in counts}}

    # the exchange

    def _lines(self, file: str) -> list[str] | None:
        if file not in self.files:
            try:
                text = (self.root / file).read_text(errors="replace") if self.root else None
            except OSError:
                text = None
            self.files[file] = text.splitlines() if text is not None else None
        return self.files[file]

    def _source(self, fn: Function) -> str:
        lines = self._lines(fn.file)
        if lines is None:
            return ""
        return "\n".join(
            f"{i}: {lines[i - 1]}" for i in range(fn.line, min(fn.end_line, len(lines)) + 1)
        )

    def _ask(self, phase: str, system: str, request: dict, check, what: str) -> dict | None:
        """The answer to one question, checked; None when none came that the check accepts."""
        stats = self.stats[phase]
        body = json.dumps(
            {"model": self.model, "system": system, "request": request}, sort_keys=True
        )
        key = hashlib.sha256(body.encode()).hexdigest()
        cached = self.cache / f"{key}.json" if self.cache else None
        if cached is not None and cached.exists():
            try:
                answer = json.loads(cached.read_text())
            except (OSError, ValueError) as e:
                answer, problem = None, f"unreadable ({e})"
            else:
                problem = check(answer)
            if not problem:
                stats.cached += 1
                return answer
            # cached by an older gigi that checked less, or damaged: asked again
            stats.cache_dropped += 1
            with contextlib.suppress(OSError):
                cached.unlink()
        last, failed, wait = "", False, 0.0
        for attempt in range(self.retries + 1):
            if attempt:
                if wait > self.retry_budget_left:
                    last += f"; not retried: {wait:.1f} s more than the retry budget left"
                    break
                self.retry_budget_left -= wait
                stats.retry_wait_s += wait
                time.sleep(wait)
            self.limit.wait()
            t = time.perf_counter()
            try:
                resp = self.client.chat.completions.create(
                    model=self.model,
                    messages=[
                        {"role": "system", "content": system},
                        {"role": "user", "content": json.dumps(request)},
                    ],
                    response_format={"type": "json_object"},
                    temperature=0,
                )
            except Exception as e:  # noqa: BLE001 - any transport or API error is retried
                stats.calls += 1
                stats.seconds += time.perf_counter() - t
                last = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                failed = True
                asked = _asked_wait(e)
                wait = asked if asked is not None else _backoff(attempt)
                continue
            stats.calls += 1
            stats.seconds += time.perf_counter() - t
            usage = getattr(resp, "usage", None)
            if usage is not None:
                stats.prompt_tokens += usage.prompt_tokens or 0
                stats.completion_tokens += usage.completion_tokens or 0
            try:
                answer = json.loads(resp.choices[0].message.content or "")
            except (ValueError, IndexError, AttributeError, TypeError) as e:
                problem = f"not JSON ({e})"
            else:
                problem = check(answer)
            if problem:
                last, failed, wait = problem, False, _backoff(attempt)
                continue
            if cached is not None:
                tmp = cached.with_suffix(".tmp")
                tmp.write_text(json.dumps(answer))
                tmp.replace(cached)
            return answer
        if failed:
            stats.failed += 1
        else:
            stats.malformed += 1
        stats.rejected.append(f"{what}: {last}")
        return None


def _backoff(attempt: int) -> float:
    """The wait before retry ``attempt + 1`` when the server asked for none: 0.2 s, doubled
    each time, at most 5 s."""
    return min(0.2 * 2**attempt, 5.0)


def _asked_wait(e: Exception) -> float | None:
    """The wait a 429 or 503 asks for in its Retry-After header, None when it asks for none."""
    response = getattr(e, "response", None)
    if getattr(response, "status_code", None) not in (429, 503):
        return None
    value = response.headers.get("retry-after")
    return retry_after_s(value, time.time()) if value is not None else None


def retry_after_s(value: str, now: float) -> float | None:
    """Seconds to wait for a Retry-After header's VALUE (seconds, or an HTTP date) at time
    NOW (Unix seconds), at most RETRY_AFTER_MAX_S; None when VALUE is neither.

    >>> retry_after_s("2", 0.0), retry_after_s("3600", 0.0), retry_after_s("soon", 0.0)
    (2.0, 60.0, None)
    >>> retry_after_s("Thu, 01 Jan 1970 00:00:30 GMT", 0.0)
    30.0
    """
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000": UTC, by RFC 5322
            when = when.replace(tzinfo=UTC)
        seconds = max(when.timestamp() - now, 0.0)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, RETRY_AFTER_MAX_S)


def summary_line(llm: dict) -> str:
    """One line for the scan's summary from ``LLMBackend.report()``: a scan in which some
    questions got no usable answer says it is incomplete."""
    t = llm["total"]
    line = (
        f"{t['calls']} calls, {t['cached']} answered from cache, "
        f"{t['failed']} failed, {t['malformed']} malformed"
    )
    if t["cache_dropped"]:
        line += f", {t['cache_dropped']} cached answers dropped and asked again"
    missing = t["failed"] + t["malformed"]
    if not missing:
        return f"LLM: {line}"
    questions = "question" if missing == 1 else "questions"
    return (
        f"LLM recall incomplete: {line}; the offline rules stood in for the {missing} "
        f"{questions} left unanswered (report.json lists them)"
    )


__all__ = ["LLMBackend", "LLMError", "retry_after_s", "summary_line"]
