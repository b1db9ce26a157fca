"""``scan``: parse, recall (offline or LLM), verify, and write the tables and the report."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gigi.scan._offline import (
    Candidate,
    ResourceGuess,
    free_heads,
    links_of,
    list_elements,
    log_levels,
    owners,
    phase1,
    phase2,
    records_of,
    resource_of,
    slow_branches,
)
from gigi.scan._parse import (
    HEADER_SUFFIXES,
    ScanError,
    Unit,
    compile_flags,
    load_compile_commands,
    parse_file,
    source_files,
    unit_name,
)
from gigi.scan._verify import verify

KINDS = ("WAIT", "ACQUIRE", "USE", "RELEASE")


@dataclass
class ScanResult:
    root: str
    units: list[Unit]
    resources: list[ResourceGuess]
    candidates: list[tuple[Candidate, bool, str]]  # candidate, verified, reason
    stats: dict = field(default_factory=dict)
    # resources the recall proposed but no event site of which passed verification: nothing
    # confirms them and nothing could record them, so they stay out of resources.parquet
    unconfirmed: list[ResourceGuess] = field(default_factory=list)

    def verified(self) -> list[Candidate]:
        return [c for c, ok, _ in self.candidates if ok]


def _parse_one(args):
    return parse_file(*args)


def _parse_all(
    files: list[Path], base: Path, commands, jobs: int, progress, done: int, total: int
) -> list[Unit]:
    """Parse FILES (in worker processes when there are JOBS and files enough), reporting
    progress as DONE + i of TOTAL."""
    work = [(str(p), str(base), compile_flags(p, base, commands)) for p in files]
    units: list[Unit] = []
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(jobs) as pool:
            for i, u in enumerate(pool.map(_parse_one, work, chunksize=4), 1):
                units.append(u)
                if progress:
                    progress(done + i, total)
    else:
        for i, w in enumerate(work, 1):
            units.append(_parse_one(w))
            if progress:
                progress(done + i, total)
    return units


def scan(
    src: str | os.PathLike,
    *,
    compile_commands: str | os.PathLike | None = None,
    backend=None,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    only: list[str] | None = None,
) -> ScanResult:
    """Scan a source tree. ``backend`` proposes resources and events (``None``: offline).
    ``only`` names the files to scan (paths under ``src``); the rest of the tree is still
    there for their includes."""
    root = Path(src)
    files = source_files(root)
    if only is not None:
        wanted = {os.path.normpath(f) for f in only}
        files = [p for p in files if os.path.relpath(p, root) in wanted]
        missing = wanted - {os.path.relpath(p, root) for p in files}
        if missing:
            raise ScanError(f"{root}: no source file {sorted(missing)[0]}")
    if not files:
        raise ScanError(f"{root}: no C or C++ source files")
    base = root if root.is_dir() else root.parent
    commands = load_compile_commands(Path(compile_commands)) if compile_commands else None
    t0 = time.perf_counter()
    jobs = jobs or min(os.cpu_count() or 1, 8)
    # sources first; the tree's headers they include come with them, walked in their context,
    # and only a header no source includes is parsed on its own
    sources = [p for p in files if p.suffix not in HEADER_SUFFIXES]
    units = _parse_all(sources, base, commands, jobs, progress, 0, len(files))
    by_file = {u.file: u for u in units}
    for u in units:
        for h in u.headers:
            by_file.setdefault(h.file, h)
        u.headers = []
    alone = [p for p in files if p.suffix in HEADER_SUFFIXES and unit_name(p, base) not in by_file]
    done = len(files) - len(alone)
    if progress:
        progress(done, len(files))
    for u in _parse_all(alone, base, commands, jobs, progress, done, len(files)):
        by_file[u.file] = u
    order = {unit_name(p, base): i for i, p in enumerate(files)}
    if only is not None:  # and the tree's headers those files include
        for name in by_file:
            order.setdefault(name, len(order))
    units = sorted((u for f, u in by_file.items() if f in order), key=lambda u: order[u.file])
    parse_s = time.perf_counter() - t0
    records = [r for u in units for r in u.records]
    members = [m for u in units for m in u.members]
    functions = {(f.file, f.name): f for u in units for f in u.functions}
    t1 = time.perf_counter()
    list_elements(functions.values(), members)
    if backend is None:
        guesses = phase1(records, members)
    else:
        guesses = backend.phase1(records, members)
    names = {g.name: g for g in guesses}
    own = owners(guesses)
    declared = {g.name: g.file for g in guesses}
    proposals: list[Candidate] = []
    for fn in functions.values():
        res = resource_of(fn, own, declared)
        if res is None:
            continue
        if backend is None:
            proposals += phase2(fn, res, names[res])
        else:
            proposals += backend.phase2(fn, res, names[res])
    # logs counted by their end position, whatever proposed the records (a code pattern)
    logs, logged = log_levels(list(functions.values()), records, members, guesses)
    guesses = [*guesses, *(g for g in logs if g.name not in names)]
    names.update({g.name: g for g in logs if g.name not in names})
    proposals += logged
    recall_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    results = []
    lists: dict[str, tuple] = {}  # resource -> its records, its lists, its lists of free units
    for g in names.values():
        links = links_of(g)
        lists[g.name] = (records_of(g), links, free_heads(g, links))
    for c in proposals:
        fn = functions.get((c.file, c.function))
        g = names.get(c.resource)
        mine, links, free = lists[c.resource] if g else (set(), set(), set())
        v = verify(c, fn, mine, g is not None, links, g.level if g else "", free)
        results.append((c, v.ok, v.reason))
    # a function that acquires or releases touches the data as part of it: not a USE of its own
    moves = {
        (c.file, c.function, c.resource)
        for c, ok, _ in results
        if ok and c.kind in ("ACQUIRE", "RELEASE")
    }
    results = [
        (c, False, "the function acquires or releases; its accesses are part of that")
        if ok and c.kind == "USE" and (c.file, c.function, c.resource) in moves
        else (c, ok, why)
        for c, ok, why in results
    ]
    results = _at_the_interface(results, functions)
    results = _waits_for_what_they_retry(results, functions, names)
    results = _objects_through_calls(results, functions)
    results = _waits_on_what_they_missed(results, functions, names, own, declared)
    locks, held = _lock_functions(functions, names)
    heap, allocated = _allocator_functions(functions, names)
    results += held + allocated
    guesses += locks + heap
    exclusive = {g.name for g in guesses if g.sharing in ("exclusive", "shared")}
    results = _through_wrappers(results, functions, exclusive | {g.name for g in locks})
    verify_s = time.perf_counter() - t2
    stats = {
        "files": len(files),
        "lines": sum(u.lines for u in units),
        "functions": len(functions),
        "records": len(records),
        "diagnostics": sum(len(u.diagnostics) for u in units),
        "parse_s": round(parse_s, 3),
        "recall_s": round(recall_s, 3),
        "verify_s": round(verify_s, 3),
    }
    if backend is not None:
        stats["llm"] = backend.report()
    sited = {c.resource for c, ok, _ in results if ok}
    return ScanResult(
        str(base),
        units,
        [g for g in guesses if g.name in sited],
        results,
        stats,
        unconfirmed=[g for g in guesses if g.name not in sited],
    )


def _waits_for_what_they_retry(results: list, functions: dict, guesses: dict) -> list:
    """A wait loop that retries a call that ACQUIREs some resource waits for that resource,
    whatever structure its condition reads, and in whatever function it stands
    (sqlite3BtreeBeginTrans retries sqlite3PagerBegin: it waits for the pager's lock). Such
    loops in functions the recall gave no resource are proposed here and verified as any
    WAIT is."""
    acquires: dict[str, set[str]] = {}
    for c, ok, _ in results:
        if ok and c.kind == "ACQUIRE":
            acquires.setdefault(c.function.split("::")[-1], set()).add(c.resource)

    def retried(loop, own: str | None) -> tuple[str, str] | None:
        calls = set(loop.body_calls + loop.cond_calls)
        if own is not None and any(own in acquires.get(x, ()) for x in calls):
            return None  # it retries its own resource's acquisition
        found = sorted((x, r) for x in calls for r in acquires.get(x, ()) if r != own)
        return found[0] if len({r for _, r in found}) == 1 else None

    out = []
    waits = set()
    for c, ok, why in results:
        fn = functions.get((c.file, c.function))
        loop = next((lp for lp in fn.loops if lp.line == c.line), None) if fn else None
        if c.kind == "WAIT":
            waits.add((c.file, c.function, c.line))
            hit = retried(loop, c.resource) if ok and loop is not None else None
            if hit is not None:
                c = replace(c, resource=hit[1])
                why = f"{why}; it retries {hit[0]}, an ACQUIRE of {hit[1]}"
        out.append((c, ok, why))
    for fn in functions.values():
        for loop in fn.loops:
            if (fn.file, fn.name, loop.line) in waits or (hit := retried(loop, None)) is None:
                continue
            callee, resource = hit
            g = guesses[resource]
            c = Candidate(
                fn.file,
                fn.name,
                loop.line,
                "WAIT",
                resource,
                "",
                "1",
                "heuristic",
                f"loop retrying {callee}, an ACQUIRE of {resource}",
            )
            v = verify(c, fn, records_of(g), True, links_of(g))
            reason = f"{v.reason}; it retries {callee}" if v.ok else v.reason
            out.append((c, v.ok, reason))
    return out


def _waits_on_what_they_missed(
    results: list, functions: dict, guesses: dict, own: dict, declared: dict
) -> list:
    """A miss waits for the resource the lookup was made on, in whatever function the branch
    stands: getPageNormal (the pager's) reads the page when sqlite3PcacheFetch (the page
    cache's) had no data for it, so the wait is on the page cache, and lines up with the
    holds of its pages."""
    by_name = {f.name.split("::")[-1]: f for f in functions.values()}
    out = []
    for c, ok, why in results:
        fn = functions.get((c.file, c.function))
        g = guesses.get(c.resource)
        if ok and c.kind == "WAIT" and fn is not None and g is not None:
            slow = next(
                (s for s in slow_branches(fn, records_of(g)) if s.branch.line == c.line), None
            )
            callee = by_name.get(slow.lookup) if slow and slow.lookup else None
            looked_up = resource_of(callee, own, declared) if callee else None
            if looked_up and looked_up != c.resource:
                c = replace(c, resource=looked_up)
                why = f"{why}; {slow.lookup} looks up {looked_up}: the wait is on it"
        out.append((c, ok, why))
    return out


def _objects_through_calls(results: list, functions: dict) -> list:
    """A site whose statement calls a function that performs the same event on the same
    resource, for an object it takes as an integer parameter, performs it for the argument
    passed there: walTryBeginRead's ``walLockShared(pWal, WAL_READ_LOCK(mxI))`` takes the read
    lock mxI, and sqlite3WalEndReadTransaction gives back ``WAL_READ_LOCK(pWal->readLock)``.
    Without it, the outer event (the one recorded) would be of the resource as a whole."""
    by_name = {name: fn for (_, name), fn in functions.items()}
    objects = {
        (c.function, c.kind, c.resource): c.object_expr
        for c, ok, _ in results
        if ok and c.object_expr
    }
    out = []
    for c, ok, why in results:
        fn = functions.get((c.file, c.function))
        if ok and not c.object_expr and fn is not None:
            for call in fn.calls:
                callee = by_name.get(call.callee)
                param = objects.get((call.callee, c.kind, c.resource))
                if call.line != c.line or callee is None or param is None:
                    continue
                names = [n for _, n in callee.params]
                i = names.index(param) if param in names else -1
                if 0 <= i < len(call.args) and "*" not in callee.params[i][0]:
                    c = replace(c, object_expr=call.args[i].strip())
                    why = f"{why}; the object is what it passes {call.callee} as {param}"
                    break
        out.append((c, ok, why))
    return out


WRAPPER_LINES = 30  # a wrapper is short: its job is the call
# calls that check or report, not work: a wrapper may make them beside its one call
CHECKS = re.compile(r"assert|sanity|trace|debug|log|^memset$|^memcpy$|^printf$", re.I)
GUARDS = re.compile(r"mutex|spin_?(un)?lock|rwlock|(^|_)(un)?lock$", re.I)
# the platform's locks: what a call to each does to the lock it is handed
LOCK_PRIMITIVES = {
    "pthread_mutex_lock": ("ACQUIRE",),
    "pthread_mutex_trylock": ("ACQUIRE",),
    "pthread_mutex_timedlock": ("ACQUIRE",),
    "pthread_mutex_unlock": ("RELEASE",),
    "pthread_spin_lock": ("ACQUIRE",),
    "pthread_spin_trylock": ("ACQUIRE",),
    "pthread_spin_unlock": ("RELEASE",),
    "pthread_rwlock_rdlock": ("ACQUIRE",),
    "pthread_rwlock_wrlock": ("ACQUIRE",),
    "pthread_rwlock_tryrdlock": ("ACQUIRE",),
    "pthread_rwlock_trywrlock": ("ACQUIRE",),
    "pthread_rwlock_timedrdlock": ("ACQUIRE",),
    "pthread_rwlock_timedwrlock": ("ACQUIRE",),
    "pthread_rwlock_unlock": ("RELEASE",),
    "sem_wait": ("WAIT", "ACQUIRE"),
    "sem_timedwait": ("WAIT", "ACQUIRE"),
    "sem_trywait": ("ACQUIRE",),
    "sem_post": ("RELEASE",),
    "pthread_cond_wait": ("WAIT",),
    "pthread_cond_timedwait": ("WAIT",),
}


def _lock_functions(functions: dict, names: dict) -> tuple[list, list]:
    """A function whose job is one call to the platform's locks (a lock API:
    ``uv_mutex_lock``, a ``slabs_lock`` taken for callers; its file's own helpers too, whose
    public wrappers then take the event from them) hands that lock out: its
    ACQUIRE, RELEASE or WAIT, on the lock named by what it is handed (a parameter's type, or a
    global). Inside a function among other work the same call only guards that work, and
    stays unrecorded. Returns the locks as resources, and their verified sites."""
    guesses: dict[str, ResourceGuess] = {}
    out = []
    for fn in functions.values():
        work = [c for c in fn.calls if not CHECKS.search(c.callee) and c.callee != ERRNO]
        if fn.end_line - fn.line > WRAPPER_LINES or len(work) > 2:
            continue
        prims = [c for c in work if c.callee in LOCK_PRIMITIVES]
        if len(prims) != 1 or not _unconditional(fn, prims[0]):
            continue
        if prims[0].loops and not _retries_on_interrupt(fn, prims[0]):
            continue
        call = prims[0]
        lock = _lock_name(fn, call.args[0] if call.args else "")
        if not lock:
            continue
        if lock not in names and lock not in guesses:
            sharing = "shared" if "rwlock" in call.callee else "exclusive"
            if call.callee.startswith("sem_"):
                sharing = "pool"
            guesses[lock] = _found(
                lock, fn, sharing, "", f"handed out by {fn.name} through {call.callee}"
            )
        for kind in LOCK_PRIMITIVES[call.callee]:
            why = f"its job is {call.callee} on {lock}"
            c = Candidate(fn.file, fn.name, call.line, kind, lock, "", "1", "heuristic", why)
            out.append((c, True, f"verified: {why}"))
    return list(guesses.values()), out


def _found(name: str, fn, sharing: str, unit: str, reason: str) -> ResourceGuess:
    """A resource found by what one function does to it (a lock API, an allocator), rather
    than proposed from its record by phase 1."""
    return ResourceGuess(name, fn.file, fn.line, sharing, unit, [], 1.0, [reason])


# the C library's memory: what a call to each does to the heap
MEMORY_PRIMITIVES = {
    "malloc": ("ACQUIRE",),
    "calloc": ("ACQUIRE",),
    "aligned_alloc": ("ACQUIRE",),
    "valloc": ("ACQUIRE",),
    "memalign": ("ACQUIRE",),
    "strdup": ("ACQUIRE",),
    "strndup": ("ACQUIRE",),
    "realloc": ("ACQUIRE", "RELEASE"),
    "reallocf": ("ACQUIRE", "RELEASE"),
    "free": ("RELEASE",),
}
ATOMIC_COUNT = re.compile(r"atomic.*(add|sub|inc|dec)|fetch_(add|sub)|(add|sub)_fetch", re.I)


def _allocator_functions(functions: dict, names: dict) -> tuple[list, list]:
    """A memory budget the application keeps: a short function whose job is one call to the
    C library's memory functions, and which counts what it takes or gives back (``used +=
    size``, an atomic add to ``used_memory``), returning what it allocates or handing back a
    pointer it was given (or one made from it: ``free((char *)ptr - PREFIX)``), is that
    count's ACQUIRE or RELEASE. A plain ``strdup`` keeps no budget and is no event. Its own
    file's helpers too (``ztrymalloc_usable_internal``): the interface's wrappers of them take
    their event from them. Returns the budgets as resources, and the sites."""
    out = []
    guesses: dict[str, ResourceGuess] = {}
    for fn in functions.values():
        work = [c for c in fn.calls if not CHECKS.search(c.callee)]
        if fn.end_line - fn.line > WRAPPER_LINES:
            continue
        prims = [c for c in work if c.callee in MEMORY_PRIMITIVES]
        if len(prims) != 1 or prims[0].loops:
            continue
        call = prims[0]
        budget = _budget(fn)
        if not budget:
            continue
        kinds = MEMORY_PRIMITIVES[call.callee]
        gives = "RELEASE" in kinds and any(_from_params(fn, a) for a in call.args[:1])
        takes = "ACQUIRE" in kinds and _returns_result_of(fn, call.callee)
        for kind, fits in (("ACQUIRE", takes), ("RELEASE", gives)):
            if fits and (kind == "ACQUIRE" or _unconditional(fn, call)):
                why = f"its job is {call.callee}, counted in {budget}"
                c = Candidate(fn.file, fn.name, call.line, kind, budget, "", "1", "heuristic", why)
                out.append((c, True, f"verified: {why}"))
                if budget not in names and budget not in guesses:
                    reason = f"memory counted by {fn.name} as it calls {call.callee}"
                    guesses[budget] = _found(budget, fn, "pool", "bytes", reason)
    return list(guesses.values()), out


def _budget(fn) -> str:
    """What FN counts memory in: a global or a member it adds to or takes from (``+=``,
    ``-=``, an atomic add or subtract), or "" when it counts nothing."""
    for a in fn.assigns:
        if a.op in ("+=", "-=") and a.target not in fn.locals and a.target:
            return a.target
    for c in fn.calls:
        if ATOMIC_COUNT.search(c.callee) and c.args:
            name = _bare(c.args[0]).lstrip("&").strip()
            if re.fullmatch(r"[A-Za-z_]\w*", name) and name not in fn.locals:
                return name
    return ""


def _from_params(fn, arg: str) -> bool:
    """Whether ARG is one of FN's parameters, or a local made from one."""
    params = {n for _, n in fn.params if n}
    name = _bare(arg)
    if name in params:
        return True
    made = {a.target for a in fn.assigns if set(a.sources) & params and "." not in a.target}
    return name in made


C_SCALARS = {"void", "char", "int", "long", "short", "unsigned", "signed", "float", "double"}


ERRNO = "__errno_location"  # errno, as the C library spells it


def _retries_on_interrupt(fn, call) -> bool:
    """Whether the loops around CALL only retry it when a signal interrupted it
    (``do r = sem_wait(sem); while (r == -1 && errno == EINTR)``): no wait of its own."""
    around = [lp for lp in fn.loops if lp.line <= call.line <= lp.end_line]
    return bool(around) and all(ERRNO in lp.cond_calls for lp in around)


def _lock_name(fn, arg: str) -> str:
    """The lock an argument names: a parameter's type (``uv_mutex_t *mutex``: uv_mutex_t),
    or a global's name (``&slabs_lock``); "" for anything else (a member, an expression)."""
    name = _bare(arg).lstrip("&").strip()
    name = re.sub(r"\s*\[.*\]$", "", name)  # one of a table of locks: item_locks[hv & mask]
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return ""
    for ctype, pname in fn.params:
        if pname == name:
            base = ctype.split("|")[0].replace("const", "").replace("*", "").strip()
            plain = re.fullmatch(r"[A-Za-z_]\w*", base) and base not in C_SCALARS
            return base if plain else ""  # a void * handed in names no lock
    return "" if name in fn.locals else name


def _through_wrappers(
    results: list, functions: dict, locks: set[str] = frozenset(), rounds: int = 3
) -> list:
    """A thin wrapper performs its callee's event: a short function of the interface (not a
    file's static helper, whose events are its callers') that makes one call beside checks
    (a lock taken around it aside) and either returns what that call ACQUIREs (in the return
    itself, or through a local it returns: ngx_pcalloc's ``p = ngx_palloc(...)``), or hands
    it one of its own parameters to RELEASE or, for a lock in ``locks``, to take,
    unconditionally or behind a test of its parameters alone (``if (p)``). Outside
    any loop; proposed at the call, callers of callers too, up to ``rounds`` deep; a function
    the scan already gave an event of that kind keeps its own. The instrumenter records the
    outermost of nested events of one kind and resource, so a wrapper's event and its
    callee's are one."""
    kinds_of: dict[str, set[str]] = {}
    events: dict[str, dict[str, set[str]]] = {}  # function -> kind -> resources
    for c, ok, _ in results:
        if ok:
            kinds_of.setdefault(c.function, set()).add(c.kind)
            if c.kind in ("ACQUIRE", "RELEASE"):
                events.setdefault(c.function, {}).setdefault(c.kind, set()).add(c.resource)
    added = []
    for _ in range(rounds):
        new: dict[str, dict[str, set[str]]] = {}
        for fn in functions.values():
            # the lock a wrapper may take around its call guards it (slabs_alloc)
            work = [
                c for c in fn.calls if not CHECKS.search(c.callee) and not GUARDS.search(c.callee)
            ]
            if fn.internal or fn.end_line - fn.line > WRAPPER_LINES or len(work) > 2:
                continue
            params = {n for _, n in fn.params if n}
            for call in work:
                got = events.get(call.callee)
                if not got or call.indirect or call.loops or call.callee == fn.name:
                    continue
                for kind, resources in got.items():
                    if kind in kinds_of.get(fn.name, ()):
                        continue
                    passes = any(_bare(a) in params for a in call.args)
                    if kind == "ACQUIRE" and passes and resources <= locks:
                        fits = _unconditional(fn, call)
                        how = f"hands its parameter to {call.callee}, which locks it"
                    elif kind == "ACQUIRE":
                        fits = _returns_result_of(fn, call.callee)
                        how = f"returns what {call.callee} acquires"
                    else:
                        fits = passes and _unconditional(fn, call)
                        how = f"hands its parameter to {call.callee}, which releases it"
                    if not fits:
                        continue
                    kinds_of.setdefault(fn.name, set()).add(kind)
                    for res in sorted(resources):
                        new.setdefault(fn.name, {}).setdefault(kind, set()).add(res)
                        c = Candidate(
                            fn.file,
                            fn.name,
                            call.line,
                            kind,
                            res,
                            "",
                            "1",
                            "heuristic",
                            f"a thin wrapper: it {how}",
                        )
                        added.append((c, True, f"verified: a thin wrapper that {how}"))
        if not new:
            break
        for name, kinds in new.items():
            for kind, resources in kinds.items():
                events.setdefault(name, {}).setdefault(kind, set()).update(resources)
    return results + added


def _bare(arg: str) -> str:
    """An argument without the casts in front of it or the parentheses around it:
    ``(void *) ptr`` and ``(void *)(ptr)`` are ``ptr``."""
    arg = arg.strip()
    while True:
        m = re.match(r"\(\s*[A-Za-z_][\w\s]*\**\s*\)\s*(?=\S)", arg)
        if not m:
            break
        arg = arg[m.end() :]
    while arg.startswith("(") and arg.endswith(")"):
        arg = arg[1:-1].strip()
    return arg


def _unconditional(fn, call) -> bool:
    """Whether CALL runs whenever FN does, but for tests of FN's own locals and parameters
    (``if (p)``): a branch on the state of something else makes it a decision, not a
    wrapper's one call."""
    on_path = set(call.path)
    return all(
        not b.cond_members and not b.cond_calls for b in fn.branches if (b.if_id, b.side) in on_path
    )


def _returns_result_of(fn, callee: str) -> bool:
    """Whether FN returns the result of calling CALLEE: in the return itself, or through a
    local the call's result was assigned to."""
    held = {a.target for a in fn.assigns if callee in a.calls and "." not in a.target}
    for _, reads, text in fn.returns:
        if re.search(rf"\b{re.escape(callee)}\s*\(", text) or held & set(reads):
            return True
    return False


def _at_the_interface(results: list, functions: dict) -> list:
    """A helper private to its file (static in C) whose every caller performs the same event
    on the same resource is part of their event: it is recorded once, where callers see it
    (pcacheUnpin inside sqlite3PcacheRelease)."""
    callers: dict[tuple[str, str], set[str]] = {}
    for fn in functions.values():
        for call in fn.calls:
            callers.setdefault((fn.file, call.callee), set()).add(fn.name)
    events = {(c.file, c.function, c.kind, c.resource) for c, ok, _ in results if ok}
    out = []
    for c, ok, why in results:
        fn = functions.get((c.file, c.function))
        by = callers.get((c.file, c.function), set()) - {c.function}
        if (
            ok
            and fn is not None
            and fn.internal
            and by
            and all((c.file, f, c.kind, c.resource) in events for f in by)
        ):
            ok, why = False, f"part of the {c.kind} of its callers ({', '.join(sorted(by))})"
        out.append((c, ok, why))
    return out


# --- output ------------------------------------------------------------------------------------


def write(result: ScanResult, out: str | os.PathLike) -> dict:
    """Write sites.parquet and resources.parquet (trace format v1), candidates.parquet (every
    candidate with its verdict), the hierarchy tables and report.json; return the report."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sites = [c for c, ok, _ in result.candidates if ok]
    pq.write_table(
        pa.table(
            {
                "site": pa.array(range(1, len(sites) + 1), pa.int32()),
                "file": pa.array([c.file for c in sites], pa.string()),
                "line": pa.array([c.line for c in sites], pa.int32()),
                "function": pa.array([c.function for c in sites], pa.string()),
                "kind": pa.array([c.kind for c in sites], pa.string()),
                "resource": pa.array([c.resource for c in sites], pa.string()),
                "origin": pa.array([c.origin for c in sites], pa.string()),
                "verified": pa.array([True] * len(sites), pa.bool_()),
                # columns of the scanner's own (readers ignore them): what the instrumenter
                # passes as the event's object and amount
                "object_expr": pa.array([c.object_expr for c in sites], pa.string()),
                "amount_expr": pa.array([c.amount_expr for c in sites], pa.string()),
            }
        ),
        out / "sites.parquet",
    )
    pq.write_table(
        pa.table(
            {
                "resource": pa.array([g.name for g in result.resources], pa.string()),
                "capacity": pa.array([None] * len(result.resources), pa.int64()),
                "unit": pa.array([g.unit for g in result.resources], pa.string()),
                "sharing": pa.array([g.sharing for g in result.resources], pa.string()),
                # the scanner's own (readers ignore it): for a log counted by its end
                # position, the member path to it from the record the log is named after
                "level": pa.array([g.level or None for g in result.resources], pa.string()),
            }
        ),
        out / "resources.parquet",
    )
    cands = [dict(asdict(c), verified=ok, reason=why) for c, ok, why in result.candidates]
    pq.write_table(
        _rows(cands, Candidate, extra={"verified": pa.bool_(), "reason": pa.string()}),
        out / "candidates.parquet",
    )
    hierarchy = out / "hierarchy"
    hierarchy.mkdir(exist_ok=True)
    for name, rows in (
        ("records", [asdict(r) for u in result.units for r in u.records]),
        ("members", [asdict(m) for u in result.units for m in u.members]),
        (
            "functions",
            [
                {
                    k: v
                    for k, v in asdict(f).items()
                    if k in ("name", "file", "line", "end_line", "record", "return_type", "comment")
                }
                for u in result.units
                for f in u.functions
            ],
        ),
        (
            "calls",
            [
                {
                    "function": f.name,
                    "file": f.file,
                    "callee": c.callee,
                    "line": c.line,
                    "indirect": c.indirect,
                }
                for u in result.units
                for f in u.functions
                for c in f.calls
            ],
        ),
        (
            "accesses",
            [
                {
                    "function": f.name,
                    "file": f.file,
                    "record": a.record,
                    "member": a.member,
                    "line": a.line,
                    "op": a.op,
                }
                for u in result.units
                for f in u.functions
                for a in f.accesses
            ],
        ),
        ("diagnostics", [asdict(d) for u in result.units for d in u.diagnostics]),
    ):
        pq.write_table(
            pa.Table.from_pylist(rows) if rows else pa.table({"file": pa.array([], pa.string())}),
            hierarchy / f"{name}.parquet",
        )
    report = report_of(result)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def _rows(rows: list[dict], cls, extra: dict) -> pa.Table:
    fields = [f for f in cls.__dataclass_fields__]
    types = {f: pa.int32() if f == "line" else pa.string() for f in fields} | extra
    return pa.table({k: pa.array([r[k] for r in rows], t) for k, t in types.items()})


def report_of(result: ScanResult) -> dict:
    per_kind = {}
    for k in KINDS:
        mine = [(c, ok, why) for c, ok, why in result.candidates if c.kind == k]
        per_kind[k] = {
            "candidates": len(mine),
            "verified": sum(ok for _, ok, _ in mine),
            "rejected": [
                {
                    "file": c.file,
                    "function": c.function,
                    "line": c.line,
                    "resource": c.resource,
                    "reason": why,
                }
                for c, ok, why in mine
                if not ok
            ],
        }
    return {
        "root": os.path.basename(result.root.rstrip("/")) or result.root,
        "stats": result.stats,
        "resources": [
            {
                "name": g.name,
                "file": g.file,
                "line": g.line,
                "sharing": g.sharing,
                "unit": g.unit,
                "objects": g.elements,
                "why": g.reasons,
            }
            for g in result.resources
        ],
        "unconfirmed_resources": [
            {"name": g.name, "file": g.file, "line": g.line, "why": g.reasons}
            for g in result.unconfirmed
        ],
        "kinds": per_kind,
        "diagnostics": [asdict(d) for u in result.units for d in u.diagnostics][:200],
    }
