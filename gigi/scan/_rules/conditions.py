"""A loop that blocks on a condition variable until some shared state says go
(``while (init_count < nthreads) pthread_cond_wait(&init_cond, &init_lock)``), or an if that
blocks once while it says wait, waits: for the resource that state is part of, where one was
found, else for the condition itself, named by what the wait is handed (a global, or a
record's member). The state must be shared: a member or a global the test reads, or a local
copied from one before it, not a local of the function's own. Found whatever record the
recall proposed, as a wait on a global often has none."""

from __future__ import annotations

from dataclasses import replace

from gigi.scan._offline import Candidate
from gigi.scan._rules._code import found_by
from gigi.scan._rules._found import Found, Site
from gigi.scan._rules.locks import LOCK_PRIMITIVES, lock_name

# what wakes them
SIGNALS = {"pthread_cond_signal", "pthread_cond_broadcast", "cnd_signal", "cnd_broadcast"}
# the waits of the platform's condition variables (POSIX and C11)
CONDITION_WAITS = {k for k, kinds in LOCK_PRIMITIVES.items() if kinds == ("WAIT",)} | {
    "cnd_wait",
    "cnd_timedwait",
}


def waits_on_conditions(found: Found) -> Found:
    # and the lock APIs whose job is such a wait (uv_cond_wait), as lock_apis found them
    waits = set(CONDITION_WAITS) | {
        s.candidate.function
        for s in found.sites
        if s.ok and s.candidate.kind == "WAIT" and s.why.startswith("verified: its job is")
    }
    waiting = {s.candidate.function for s in found.sites if s.ok and s.candidate.kind == "WAIT"}
    guesses = {}
    out = []
    waited: dict[str, tuple[str, set[str]]] = {}  # condition -> the resource, the state read
    for fn in found.functions.values():
        if fn.name in waiting:
            continue
        # a loop, or an if that waits once (``if (pending[type] != 0) pthread_cond_wait(...)``)
        guards = [*fn.loops, *(b for b in fn.branches if b.side == 0)]
        for guard in guards:
            calls = [
                c
                for c in fn.calls
                if c.callee in waits and guard.line <= c.line <= guard.end_line and c.args
            ]
            # globals of other files by name (the file's own are among its members)
            named = {m.rsplit(".", 1)[-1] for m in guard.cond_members}
            # (an if keeps no globals of its own: its members and locals say it)
            shared = [g for g in getattr(guard, "cond_globals", ()) if g not in named]
            # and a local the test reads that was copied from shared state before it
            # (``val = bio_pending[type]; if (val != 0)``)
            members = list(guard.cond_members) + [
                x
                for a in fn.assigns
                if a.target in guard.cond_locals and a.line < guard.line and not a.calls
                for x in a.sources
                if "." in x
            ]
            if not calls or not (members or shared):
                continue
            resource = next(
                (
                    found.owners[m.split(".")[0]][0]
                    for m in members
                    if m.split(".")[0] in found.owners
                ),
                "",
            )
            cond = lock_name(fn, calls[0].args[0])
            if not resource and cond:
                resource = cond
                if cond not in found.by_name and cond not in guesses:
                    why = f"a condition {fn.name} waits on ({calls[0].callee})"
                    guesses[cond] = found_by(cond, fn, "pool", "", why)
            if not resource:
                continue
            state = ", ".join(members + shared)
            why = f"blocks in {calls[0].callee} until {state} says go"
            c = Candidate(fn.file, fn.name, guard.line, "WAIT", resource, "", "1", "heuristic", why)
            out.append(Site(c, True, f"verified: {why}"))
            if cond:
                waited.setdefault(cond, (resource, set()))[1].update(members + shared)
            break
    out += _signals(found, waited)
    return replace(
        found, resources=(*found.resources, *guesses.values()), sites=(*found.sites, *out)
    )


def _signals(found: Found, waited: dict[str, tuple[str, set[str]]]) -> list[Site]:
    """The other side: a function that steps a count a wait reads and signals its condition
    (``init_count++; pthread_cond_signal(&init_cond)``) hands the waiters what they wait for,
    a RELEASE."""
    out = []
    for fn in found.functions.values():
        for call in fn.calls:
            if call.callee not in SIGNALS or not call.args:
                continue
            cond = lock_name(fn, call.args[0])
            if cond not in waited:
                continue
            resource, state = waited[cond]
            # a count stepped (a thread registered, a unit put back), not a flag set: a
            # flag asks the waiter for something (work to do, to stop)
            moved = [
                a
                for a in fn.assigns
                if a.target in state and a.op in ("+=", "-=") and a.line <= call.line
            ]
            if not moved:
                continue
            why = f"changes {moved[-1].target} and signals {cond} ({call.callee})"
            c = Candidate(
                fn.file, fn.name, call.line, "RELEASE", resource, "", "1", "heuristic", why
            )
            out.append(Site(c, True, f"verified: {why}"))
            break
    return out
