"""The LLM recall, through the official ``openai`` client against any OpenAI-compatible
endpoint. Nothing is sent unless an endpoint is configured; the key is never logged.

Phase 1 sends each record's declaration (name, members with types, comment) and asks whether
it is a resource; phase 2 sends each function that touches a resource (signature, facts and
source) and asks for its events. Answers must be JSON of a fixed shape (checked here, and
asked for with ``response_format``); a malformed answer is retried, then dropped with its
reason, and the scan goes on. Responses are cached by the SHA-256 of the model and the
request, so a re-scan of unchanged code sends nothing and repeats exactly. Calls are
rate-limited, retried with exponential backoff, and bounded by a timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from gigi.scan._offline import Candidate, ResourceGuess, members_by_record
from gigi.scan._parse import Function, Member, Record, ScanError

KINDS = ("WAIT", "ACQUIRE", "USE", "RELEASE")
SHARING = ("exclusive", "shared", "pool", "log")

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
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    rejected: list[str] = field(default_factory=list)


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
    arguments, else ``OPENAI_BASE_URL``, ``GIGI_LLM_MODEL``, ``OPENAI_API_KEY``."""

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

        # max_retries=0: the retries, with their backoff, are ours, so they are counted
        self.client = OpenAI(
            base_url=self.base_url, api_key=key or "unused", timeout=timeout, max_retries=0
        )
        self.retries = retries
        self.limit = _RateLimit(rate_per_s)
        self.cache = Path(cache_dir) if cache_dir else None
        if self.cache:
            self.cache.mkdir(parents=True, exist_ok=True)
        self.root = Path(source_root) if source_root else None
        self.stats = {"phase1": PhaseStats(), "phase2": PhaseStats()}

    def __repr__(self) -> str:  # the key stays out of any log
        return f"LLMBackend(model={self.model!r}, base_url={self.base_url!r})"

    # the two phases

    def phase1(self, records: list[Record], members: list[Member]) -> list[ResourceGuess]:
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
            answer = self._ask("phase1", PHASE1_PROMPT, decl, _check_phase1, f"record {r.name}")
            if not answer or not answer["resource"]:
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

    def phase2(self, fn: Function, resource: str, guess: ResourceGuess) -> list[Candidate]:
        request = {
            "function": fn.name,
            "file": fn.file,
            "lines": [fn.line, fn.end_line],
            "resource": resource,
            "objects": guess.elements,
            "source": self._source(fn),
        }
        answer = self._ask("phase2", PHASE2_PROMPT, request, _check_phase2, f"function {fn.name}")
        if not answer:
            return []
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
        return {
            phase: {
                "calls": s.calls,
                "cached": s.cached,
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.completion_tokens,
                "seconds": round(s.seconds, 3),
                "rejected_answers": s.rejected,
            }
            for phase, s in self.stats.items()
        }

    # the exchange

    def _source(self, fn: Function) -> str:
        if self.root is None:
            return ""
        try:
            lines = (self.root / fn.file).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(
            f"{i}: {lines[i - 1]}" for i in range(fn.line, min(fn.end_line, len(lines)) + 1)
        )

    def _ask(self, phase: str, system: str, request: dict, check, what: str) -> dict | None:
        stats = self.stats[phase]
        body = json.dumps(
            {"model": self.model, "system": system, "request": request}, sort_keys=True
        )
        key = hashlib.sha256(body.encode()).hexdigest()
        cached = self.cache / f"{key}.json" if self.cache else None
        if cached is not None and cached.exists():
            stats.cached += 1
            return json.loads(cached.read_text())
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(min(0.2 * 2 ** (attempt - 1), 5.0))
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
                continue
            stats.calls += 1
            stats.seconds += time.perf_counter() - t
            usage = getattr(resp, "usage", None)
            if usage is not None:
                stats.prompt_tokens += usage.prompt_tokens or 0
                stats.completion_tokens += usage.completion_tokens or 0
            try:
                answer = json.loads(resp.choices[0].message.content or "")
                problem = check(answer)
            except (ValueError, IndexError, AttributeError, TypeError) as e:
                problem = f"not JSON ({e})"
            if problem:
                last = problem
                continue
            if cached is not None:
                tmp = cached.with_suffix(".tmp")
                tmp.write_text(json.dumps(answer))
                tmp.replace(cached)
            return answer
        stats.rejected.append(f"{what}: {last}")
        return None


def _check_phase1(a) -> str:
    if not isinstance(a, dict) or not isinstance(a.get("resource"), bool):
        return "answer lacks a boolean 'resource'"
    if a["resource"]:
        if a.get("sharing") not in SHARING:
            return f"sharing {a.get('sharing')!r} is not one of {', '.join(SHARING)}"
        if not isinstance(a.get("unit"), str) or not a["unit"]:
            return "answer lacks a 'unit'"
        if not isinstance(a.get("objects", []), list):
            return "'objects' is not a list"
    return ""


def _check_phase2(a) -> str:
    if not isinstance(a, dict) or not isinstance(a.get("events"), list):
        return "answer lacks an 'events' list"
    for e in a["events"]:
        if not isinstance(e, dict) or e.get("kind") not in KINDS:
            return (
                f"event kind {e.get('kind') if isinstance(e, dict) else e!r} is not one of "
                f"{', '.join(KINDS)}"
            )
        if not isinstance(e.get("line"), int):
            return "an event without an integer 'line'"
    return ""


__all__ = ["LLMBackend", "LLMError"]
