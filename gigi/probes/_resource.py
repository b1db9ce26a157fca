"""Resources and the hot path: one record per call into the calling thread's ring.

The methods of ``Resource`` are swapped at the class level when recording starts and stops:
while off, every probe is a call to a function that returns at once.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from gigi.errors import ProbeError
from gigi.probes import _state
from gigi.probes._accel import ProbeBase, fastpath
from gigi.probes._records import HAS_VALUE, NULL_SITE, RECORD, RECORD_SIZE, RID_SHIFT
from gigi.probes._tasks import current_task
from gigi.schema import RESOURCES, Kind

_pack = RECORD.pack_into
_local = _state.local
_now = time.monotonic_ns
_SHARING = dict.fromkeys(next(c for c in RESOURCES.columns if c.name == "sharing").choices)


@dataclass(frozen=True)
class ResourceInfo:
    """What the ``resources`` table says of a resource."""

    name: str
    capacity: int | None
    unit: str | None
    sharing: str | None
    sample_every: int


class _Wait:
    """A WAIT in progress: ``with res.wait(...)`` or ``token = res.wait_begin(...)``."""

    __slots__ = ("code", "object", "amount", "site", "value", "ts", "task", "ring")

    def __enter__(self) -> _Wait:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    def end(self) -> None:
        """End the wait (from any thread); the WAIT event is written now with its duration."""
        ring = self.ring
        if ring is None:
            return
        self.ring = None
        dur = _now() - self.ts
        try:
            ring.open_waits.remove(self)
        except ValueError:
            pass
        _state.emit(
            self.ts, self.code, self.task, self.amount, self.object, self.site, self.value, dur
        )


class _NoWait:
    __slots__ = ()

    def __enter__(self) -> _NoWait:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def end(self) -> None:
        pass


_NO_WAIT = _NoWait()


class Resource(ProbeBase):
    """An application-defined resource that probes record events of.

    Create with ``gigi.probes.resource``. Every method takes ``object`` (which instance: page,
    slot, lock id; 0 = the resource as a whole), ``amount`` (units), ``site`` (an id from
    ``gigi.probes.site``) and ``value`` (a figure sampled at the site: queue length, free pages).
    """

    __slots__ = ("rid", "info", "c_wait", "c_acquire", "c_use", "c_release", "__weakref__")

    def __init__(self, rid: int, info: ResourceInfo) -> None:
        if fastpath is not None:
            fastpath.ProbeBase.__init__(self, rid)
        self.rid = rid
        self.info = info
        self.c_wait = (rid << RID_SHIFT) | Kind.WAIT
        self.c_acquire = (rid << RID_SHIFT) | Kind.ACQUIRE
        self.c_use = (rid << RID_SHIFT) | Kind.USE
        self.c_release = (rid << RID_SHIFT) | Kind.RELEASE

    def __repr__(self) -> str:
        return f"Resource({self.info.name!r})"

    # --- recording (on) -------------------------------------------------------------------
    # The pure-Python twin of the C hot path (_fastpath.c). Each method is written out in full
    # on purpose: a shared helper would cost a call per event.
    def _acquire_on(self, object=0, amount=1, site=NULL_SITE, value=None):
        try:
            r = _local.ring
        except AttributeError:
            r = _state.new_ring()
        h = r.head
        if h < r.limit:
            if value is None:
                _pack(
                    r.buf,
                    h & r.mask,
                    _now(),
                    self.c_acquire,
                    current_task.get(),
                    amount,
                    object,
                    site,
                    0,
                    0,
                )
            else:
                _pack(
                    r.buf,
                    h & r.mask,
                    _now(),
                    self.c_acquire | HAS_VALUE,
                    current_task.get(),
                    amount,
                    object,
                    site,
                    value,
                    0,
                )
            r.head = h + RECORD_SIZE
        else:
            _state.full(r, self.c_acquire, amount, object, site, value, 0)

    def _use_on(self, object=0, amount=1, site=NULL_SITE, value=None, dur=0):
        try:
            r = _local.ring
        except AttributeError:
            r = _state.new_ring()
        h = r.head
        if h < r.limit:
            if value is None:
                _pack(
                    r.buf,
                    h & r.mask,
                    _now(),
                    self.c_use,
                    current_task.get(),
                    amount,
                    object,
                    site,
                    0,
                    dur,
                )
            else:
                _pack(
                    r.buf,
                    h & r.mask,
                    _now(),
                    self.c_use | HAS_VALUE,
                    current_task.get(),
                    amount,
                    object,
                    site,
                    value,
                    dur,
                )
            r.head = h + RECORD_SIZE
        else:
            _state.full(r, self.c_use, amount, object, site, value, dur)

    def _release_on(self, object=0, amount=1, site=NULL_SITE, value=None):
        try:
            r = _local.ring
        except AttributeError:
            r = _state.new_ring()
        h = r.head
        if h < r.limit:
            if value is None:
                _pack(
                    r.buf,
                    h & r.mask,
                    _now(),
                    self.c_release,
                    current_task.get(),
                    amount,
                    object,
                    site,
                    0,
                    0,
                )
            else:
                _pack(
                    r.buf,
                    h & r.mask,
                    _now(),
                    self.c_release | HAS_VALUE,
                    current_task.get(),
                    amount,
                    object,
                    site,
                    value,
                    0,
                )
            r.head = h + RECORD_SIZE
        else:
            _state.full(r, self.c_release, amount, object, site, value, 0)

    def _wait_on(self, object=0, amount=1, site=NULL_SITE, value=None) -> _Wait:
        try:
            r = _local.ring
        except AttributeError:
            r = _state.new_ring()
        w = _Wait()
        w.code, w.object, w.amount, w.site, w.value = self.c_wait, object, amount, site, value
        w.task = current_task.get()
        w.ring = r
        r.open_waits.append(w)
        w.ts = _now()
        return w

    # --- not recording (off) --------------------------------------------------------------
    def _off(self, object=0, amount=1, site=NULL_SITE, value=None, dur=0):
        pass

    def _wait_off(self, object=0, amount=1, site=NULL_SITE, value=None):
        return _NO_WAIT

    # Public names; bound to the on/off variants by ``set_recording``.
    acquire = _off
    use = _off
    release = _off
    wait = _wait_off

    def wait_begin(self, object=0, amount=1, site=NULL_SITE, value=None):
        """Start a WAIT that ends elsewhere (a callback): call ``.end()`` on what it returns."""
        return self.wait(object, amount, site, value)


class SampledResource(Resource):
    """A resource that keeps one event in N, keyed so that one object's (or, for object 0, one
    task's) events are kept or skipped together and its holds still pair."""

    __slots__ = ("every",)

    def __init__(self, rid: int, info: ResourceInfo) -> None:
        super().__init__(rid, info)
        self.every = info.sample_every

    def _skip(self, object: int) -> bool:
        key = object or current_task.get() or threading.get_ident()
        return ((key * 0x9E3779B97F4A7C15) >> 17) % self.every != 0

    def _acquire_s(self, object=0, amount=1, site=NULL_SITE, value=None):
        if not self._skip(object):
            Resource._acquire_on(self, object, amount, site, value)

    def _use_s(self, object=0, amount=1, site=NULL_SITE, value=None, dur=0):
        if not self._skip(object):
            Resource._use_on(self, object, amount, site, value, dur)

    def _release_s(self, object=0, amount=1, site=NULL_SITE, value=None):
        if not self._skip(object):
            Resource._release_on(self, object, amount, site, value)

    def _wait_s(self, object=0, amount=1, site=NULL_SITE, value=None):
        if self._skip(object):
            return _NO_WAIT
        return Resource._wait_on(self, object, amount, site, value)


def set_recording(on: bool) -> None:
    """Bind every resource's probe methods to their recording or no-op variants."""
    R, S = Resource, SampledResource
    if on and fastpath is not None:
        R.acquire, R.use, R.release, R.wait = R._acquire_c, R._use_c, R._release_c, R._wait_on
        S.acquire, S.use, S.release, S.wait = S._acquire_s, S._use_s, S._release_s, S._wait_s
    elif on:
        R.acquire, R.use, R.release, R.wait = (R._acquire_on, R._use_on, R._release_on, R._wait_on)
        S.acquire, S.use, S.release, S.wait = S._acquire_s, S._use_s, S._release_s, S._wait_s
    else:
        for cls in (R, S):
            cls.acquire = cls.use = cls.release = R._off
            cls.wait = R._wait_off


_registry: dict[str, Resource] = {}
_registry_lock = threading.Lock()


def declare(
    name: str,
    *,
    capacity: int | None = None,
    unit: str | None = None,
    sharing: str | None = None,
    sample_every: int = 1,
) -> Resource:
    """Declare (or get back) the resource class ``name``; see ``gigi.probes.resource``."""
    if not name or not isinstance(name, str):
        raise ProbeError(f"resource name must be a non-empty string, got {name!r}")
    if sharing is not None and sharing not in _SHARING:
        raise ProbeError(
            f"resource {name!r}: sharing {sharing!r} is not one of {', '.join(_SHARING)}"
        )
    if capacity is not None and capacity < 0:
        raise ProbeError(f"resource {name!r}: capacity {capacity} is negative")
    if sample_every < 1:
        raise ProbeError(f"resource {name!r}: sample_every must be >= 1, got {sample_every}")
    info = ResourceInfo(name, capacity, unit, sharing, sample_every)
    with _registry_lock:
        old = _registry.get(name)
        if old is not None:
            if old.info != info and info != ResourceInfo(name, None, None, None, 1):
                raise ProbeError(f"resource {name!r} declared twice, as {old.info} and {info}")
            return old
        rid = len(_registry)
        cls = SampledResource if sample_every > 1 else Resource
        res = cls(rid, info)
        _registry[name] = res
    return res


def declared() -> list[ResourceInfo]:
    """Every resource declared so far, in rid order."""
    with _registry_lock:
        return [r.info for r in _registry.values()]


if fastpath is not None:
    fastpath.setup(current_task, _state.new_ring, _state.full)
