"""Transparent shared memory: each connection's arena of sealed memfd regions.

A connection copies every array argument of at least ``threshold`` bytes
once into a slice of its arena and sends a region reference instead of the
bytes; a result of at least ``threshold`` bytes is asked for with ``out`` =
a slice, and handed back as a NumPy array over that slice (no copy on the
way back either).  Such an array's ``.base`` is an :class:`ArenaSlice`, which
owns the slice until it is garbage-collected; views of the array keep it too.

The arena is a few regions (``Segment``), registered with gkcd once each
(``shm_register``) the first time a call needs room, reused by later calls
(a first-fit allocator per region), grown geometrically while their total
stays within ``max_bytes`` and gkcd's own limits (``--max-request-bytes``,
``--memory-budget``, from one ``status`` at the first growth), and released
when the connection closes (gkcd frees a closed connection's regions).  A
call that does not fit goes inline, as before the arena existed.  Where
descriptors cannot be passed (no memfd, gkcd refuses the registration) the
connection goes inline for good and says why once, on the ``gkc`` logger.

Settings: the ``shm``, ``shm_threshold`` and ``shm_max_bytes`` keywords of
``gkc.connect`` / ``gkc.aio.connect``; where a keyword is left at None, the
environment (``GKC_NO_SHM=1``, ``GKC_SHM_THRESHOLD``, ``GKC_SHM_MAX_BYTES``,
in bytes, with an optional K, M or G suffix), else the defaults below.
"""
from __future__ import annotations

import collections
import errno
import logging
import mmap as mmap_module
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional, Tuple

import numpy as np

from . import errors
from ._objects import Region

if TYPE_CHECKING:  # pragma: no cover
    from ._api import Api

log = logging.getLogger("gkc")

# Where the arena starts paying off, measured on the development machine
# (bench/bench_python_data.py --sweep, four runs; python/README.md has the
# table): a call with a result of its size (axpby) gained from 64 KiB on, a
# call with an input only (reduce) broke even between 128 and 256 KiB.
DEFAULT_THRESHOLD = 128 << 10
# The most memory one connection's arena holds: memfd pages, once touched,
# stay allocated until their region goes (reuse is what keeps them warm).
DEFAULT_MAX_BYTES = 1 << 30
# Slices start on this boundary: gkcd needs 4 bytes; 64 keeps them on cache
# lines of their own.
_ALIGN = 64
# The smallest region registered: untouched memfd pages cost nothing, and a
# few MiB spare a registration (a round trip) for the next calls.
_MIN_SEGMENT = 4 << 20
# Regions of our own at most: gkcd lets a connection hold 64, the rest are
# the caller's (c.region()).
_MAX_SEGMENTS = 8
_PAGE = 4096

# Connection states, as client.shm_state reports them.
UNUSED = "unused"            # on; nothing registered yet (no call needed it)
ACTIVE = "active"            # regions registered: big arrays go through them
DISABLED = "disabled"        # turned off by the caller (shm=False, GKC_NO_SHM=1)
UNAVAILABLE = "unavailable"  # descriptors cannot be passed: everything goes inline


def _size(text: str, what: str) -> int:
    t = text.strip().upper()
    mult = 1
    if t and t[-1] in "KMG":
        mult = 1 << {"K": 10, "M": 20, "G": 30}[t[-1]]
        t = t[:-1]
    try:
        v = int(t) * mult
    except ValueError:
        raise errors.InvalidArgument(f"{what}={text!r} is not a size in bytes") from None  # type: ignore[attr-defined]
    if v < 0:
        raise errors.InvalidArgument(f"{what}={text!r} is negative")  # type: ignore[attr-defined]
    return v


def settings(shm: Optional[bool], threshold: Optional[int],
             max_bytes: Optional[int]) -> Tuple[bool, int, int, str]:
    """(on, threshold, max_bytes, why off) from the keywords, else the
    environment, else the defaults."""
    env = os.environ
    why = ""
    if shm is None:
        shm = env.get("GKC_NO_SHM", "") in ("", "0")
        if not shm:
            why = "turned off by GKC_NO_SHM=" + env["GKC_NO_SHM"]
    elif not shm:
        why = "turned off by shm=False"
    if threshold is None:
        t = env.get("GKC_SHM_THRESHOLD", "")
        threshold = _size(t, "GKC_SHM_THRESHOLD") if t else DEFAULT_THRESHOLD
    if max_bytes is None:
        t = env.get("GKC_SHM_MAX_BYTES", "")
        max_bytes = _size(t, "GKC_SHM_MAX_BYTES") if t else DEFAULT_MAX_BYTES
    threshold, max_bytes = int(threshold), int(max_bytes)
    if threshold < 0 or max_bytes < 0:
        raise errors.InvalidArgument("shm_threshold and shm_max_bytes must be >= 0")  # type: ignore[attr-defined]
    return bool(shm), threshold, max_bytes, why


# Copies into the arena of at least this many bytes are cut into pieces that
# threads copy at once: one thread's copy (~5-10 GB/s) is what a big array
# by value waits on, the DMA behind it runs at ~50 GB/s.  np.copyto releases
# the GIL for plain dtypes, so the pieces run in parallel.
PARALLEL_COPY_MIN = 16 << 20
_copy_pool: Any = None
_copy_pool_lock = threading.Lock()


def _copy_threads() -> int:
    """GKC_COPY_THREADS, else up to 16 (the host's CPUs)."""
    try:
        n = int(os.environ.get("GKC_COPY_THREADS", "0"))
    except ValueError:
        n = 0
    return max(1, n) if n > 0 else min(16, os.cpu_count() or 1)


def _pool() -> Any:
    global _copy_pool
    with _copy_pool_lock:
        if _copy_pool is None:
            from concurrent.futures import ThreadPoolExecutor
            _copy_pool = ThreadPoolExecutor(max_workers=_copy_threads(),
                                            thread_name_prefix="gkc-copy")
        return _copy_pool


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src (casting as NumPy's "unsafe"), in pieces on several
    threads when it is big and both are C-contiguous, else in one call."""
    n = dst.size
    workers = _copy_threads()
    if (dst.nbytes < PARALLEL_COPY_MIN or workers < 2 or not dst.flags.c_contiguous
            or not src.flags.c_contiguous or src.size != n):
        np.copyto(dst, src, casting="unsafe")
        return
    d, s_ = dst.reshape(-1), src.reshape(-1)
    step = -(-n // workers)
    futs = [_pool().submit(np.copyto, d[i:i + step], s_[i:i + step], casting="unsafe")
            for i in range(0, n, step)]
    for f in futs:
        f.result()


# Linux 5.14's madvise that allocates and maps a range's pages, writable, in
# one pass: a fresh 4 KiB memfd page costs several times its copy, and
# taking the faults one by one inside the copy costs 1.2-1.7x what this costs
# (bench/RESULTS.md, "first call").  None once the kernel refused it.
_POPULATE_WRITE: Optional[int] = getattr(mmap_module, "MADV_POPULATE_WRITE", 23)


def _populate_piece(mm: Any, start: int, end: int) -> None:
    """Pages under mm[start:end] allocated and mapped, their bytes kept."""
    global _POPULATE_WRITE
    lo = start & ~(_PAGE - 1)
    hi = (end + _PAGE - 1) & ~(_PAGE - 1)
    hi = min(hi, len(mm))
    if _POPULATE_WRITE is not None and hi > lo:
        try:
            mm.madvise(_POPULATE_WRITE, lo, hi - lo)
            return
        except OSError as e:
            if e.errno == errno.EINVAL:  # a kernel before 5.14
                _POPULATE_WRITE = None
    # A write of each page's first byte back as it was, only of bytes in
    # [start, end): those are the caller's alone, while the rest of a shared
    # first page may be gkcd's result being written.
    first = (start + _PAGE - 1) & ~(_PAGE - 1)
    if first < end:
        pages = np.frombuffer(mm, np.uint8, end - first, first)[::_PAGE]
        pages[...] = pages.copy()


def populate(mm: Any, nbytes: int, offset: int = 0) -> None:
    """Allocates the pages under mm[offset:offset + nbytes] (a region's
    bytes not yet touched), keeping their bytes, on several threads at once
    when it is big."""
    workers = _copy_threads()
    end = offset + nbytes
    if nbytes < PARALLEL_COPY_MIN or workers < 2:
        _populate_piece(mm, offset, end)
        return
    step = -(-nbytes // workers)
    step = (step + _PAGE - 1) & ~(_PAGE - 1)
    futs = [_pool().submit(_populate_piece, mm, i, min(i + step, end))
            for i in range(offset, end, step)]
    for f in futs:
        f.result()


def _align(n: int) -> int:
    return (n + _ALIGN - 1) & ~(_ALIGN - 1)


# --- regions kept for the next connection of this process ------------------------------
#
# A region's pages cost more the first time (allocated and zeroed, 4 KiB at
# a time) than every later copy into them.  A connection that closes, or
# replaces an idle region by a bigger one, leaves its regions that nothing
# uses (no array over a slice, no request in flight) here, descriptor and
# mapping, and the next connection that grows its arena takes one that
# fits (a new shm_register), so a program that connects again pays for its
# pages once.  Bounded by GKC_SHM_KEEP (a size; default DEFAULT_MAX_BYTES,
# 0 keeps none), the oldest given back first.  A forked child forgets the
# parent's (the pages are shared: both would write them).

_KEEP_MAX_REGIONS = _MAX_SEGMENTS
_kept_lock = threading.Lock()
_kept: List[Tuple[int, Any, int, int, int]] = []  # (seq, mm, fd, nbytes, pop_head)
_kept_seq = 0


def _keep_bound() -> int:
    t = os.environ.get("GKC_SHM_KEEP", "")
    if not t:
        return DEFAULT_MAX_BYTES
    try:
        return _size(t, "GKC_SHM_KEEP")
    except errors.Error:
        return 0  # a malformed bound keeps nothing, and turns nothing off


def _free_kept(entry: Tuple[int, Any, int, int, int]) -> None:
    _, mm, fd, _, _ = entry
    try:
        mm.close()
    except BufferError:
        pass
    os.close(fd)


def keep(mm: Any, fd: int, nbytes: int, pop_head: int) -> bool:
    """Takes mm and fd (a region no connection uses any more) for a later
    connection; False (nothing taken) when the bound leaves no room."""
    global _kept_seq
    bound = _keep_bound()
    if nbytes > bound or mm.closed:
        return False
    with _kept_lock:
        while _kept and (sum(e[3] for e in _kept) + nbytes > bound
                         or len(_kept) >= _KEEP_MAX_REGIONS):
            _free_kept(_kept.pop(0))  # the oldest
        _kept_seq += 1
        _kept.append((_kept_seq, mm, fd, nbytes, pop_head))
    return True


def kept_size(need: int, most: int) -> Optional[int]:
    """The size of the smallest kept region of need to most bytes."""
    with _kept_lock:
        sizes = [e[3] for e in _kept if need <= e[3] <= most]
    return min(sizes) if sizes else None


def take_kept(nbytes: int) -> Optional[Tuple[Any, int, int]]:
    """A kept region of exactly nbytes, now the caller's: (mm, fd, pop_head)."""
    with _kept_lock:
        for i, e in enumerate(_kept):
            if e[3] == nbytes:
                del _kept[i]
                return e[1], e[2], e[4]
    return None


def kept_bytes() -> int:
    with _kept_lock:
        return sum(e[3] for e in _kept)


def forget_kept() -> None:
    """Frees every kept region (tests; a child after fork)."""
    with _kept_lock:
        while _kept:
            _free_kept(_kept.pop())


def _after_fork_in_child() -> None:
    global _kept_lock
    _kept_lock = threading.Lock()  # another thread may have held it at fork
    forget_kept()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Segment(Region):
    """One region of the arena, with a first-fit list of its free spans."""

    _kind = "arena region"

    def __init__(self, conn: "Api", ident: int, mm: Any, nbytes: int, fd: int = -1) -> None:
        super().__init__(conn, ident, mm, nbytes)
        self.free: List[List[int]] = [[0, nbytes]]  # [offset, size], ascending, never adjacent
        self.used = 0
        # Its bytes [0, pop_head) have pages: a slice past it meets fresh
        # ones, populated in bulk before the copy (populate).
        self.pop_head = 0
        # A descriptor of its memfd (-1: none), closed with the object unless
        # the region is kept for another connection (retire).
        self._fd = fd
        self._fd_close = weakref.finalize(self, os.close, fd) if fd >= 0 else None

    def retire(self) -> bool:
        """Hands the region to the kept ones when nothing of it is in use
        (the caller has drained the freed slices); True when it was."""
        if self.used or self._fd_close is None or not self._fd_close.alive:
            return False
        if not keep(self._mm, self._fd, self.nbytes, self.pop_head):
            return False
        self._fd_close.detach()
        return True

    def fresh(self, off: int, size: int) -> bool:
        """Whether [off, off + size) may lie on pages never touched; they
        count as populated from now on (the caller populates them)."""
        end = off + size
        if end <= self.pop_head:
            return False
        if off <= self.pop_head:
            self.pop_head = end
        return True

    def alloc(self, size: int) -> Optional[int]:
        for i, span in enumerate(self.free):
            if span[1] >= size:
                off = span[0]
                if span[1] == size:
                    del self.free[i]
                else:
                    span[0] += size
                    span[1] -= size
                self.used += size
                return off
        return None

    def give_back(self, off: int, size: int) -> None:
        self.used -= size
        fl = self.free
        i = 0
        while i < len(fl) and fl[i][0] < off:
            i += 1
        fl.insert(i, [off, size])
        if i + 1 < len(fl) and off + size == fl[i + 1][0]:
            fl[i][1] += fl.pop(i + 1)[1]
        if i > 0 and fl[i - 1][0] + fl[i - 1][1] == off:
            fl[i - 1][1] += fl.pop(i)[1]

    def _mark_released(self) -> None:
        # Unlike a caller's Region, the mapping stays: result arrays may still
        # point into it (they hold this object through their ArenaSlice, and
        # the mapping goes with the last of them).
        self.released = True
        self._conn._regions.pop(self.id, None)


class ArenaSlice:
    """Owns ``size`` bytes at ``offset`` of an arena region while it lives: the
    ``.base`` of every array the arena hands out.  Its deletion gives the bytes
    back to the arena, for a later call to reuse."""

    __slots__ = ("segment", "offset", "size", "_freed", "_iface", "__weakref__")

    def __init__(self, segment: Segment, offset: int, size: int, freed: Deque[Any]) -> None:
        self.segment, self.offset, self.size = segment, offset, size
        self._freed = freed
        self._iface: Dict[str, Any] = {}

    @property
    def __array_interface__(self) -> Dict[str, Any]:
        return self._iface

    def array(self, shape: Tuple[int, ...], dtype: Any) -> np.ndarray:
        """A writable array over the slice, whose base is this object."""
        dt = np.dtype(dtype)
        self._iface = {"version": 3, "shape": tuple(shape), "typestr": dt.str,
                       "data": (self.segment.address + self.offset, False)}
        a = np.asarray(self)
        self._iface = {}
        return a

    def __del__(self) -> None:
        # From whatever thread drops the last reference, possibly inside the
        # arena's own code: only a lock-free append, the arena frees it later.
        self._freed.append((self.segment, self.offset, self.size))

    def __repr__(self) -> str:
        return f"<gkc.ArenaSlice region={self.segment.id} offset={self.offset} bytes={self.size}>"


class In:
    """An array argument waiting for a slice (or to go inline): the array as
    the caller gave it and the wire dtype it is copied to."""

    __slots__ = ("a", "dtype", "nbytes")

    def __init__(self, a: np.ndarray, dtype: np.dtype) -> None:
        self.a, self.dtype, self.nbytes = a, dtype, int(a.size) * dtype.itemsize

    def inline(self) -> memoryview:
        return memoryview(np.ascontiguousarray(self.a, dtype=self.dtype)).cast("B")


class InPlace:
    """An argument that already lies in an arena region (a result of an
    earlier call): sent as its reference, the array kept alive until the
    reply so that its slice cannot be reused under gkcd."""

    __slots__ = ("a", "ref")

    def __init__(self, a: np.ndarray, ref: Dict[str, Any]) -> None:
        self.a, self.ref = a, ref


class Out:
    """A result that gkcd writes into a slice, if the call gets one."""

    __slots__ = ("nbytes", "dtype", "slice", "freed", "taken")

    def __init__(self, nbytes: int, dtype: Any) -> None:
        self.nbytes, self.dtype = nbytes, np.dtype(dtype)
        self.slice: Optional[Tuple[Segment, int, int]] = None
        self.freed: Optional[Deque[Any]] = None  # the arena's, once it has a slice
        self.taken = False

    def result(self, v: Any, shape: Tuple[int, ...]) -> Optional[np.ndarray]:
        """The array over the slice when v is gkcd's reference to it; else None."""
        if self.slice is None or not isinstance(v, dict) or v.get("region") != self.slice[0].id:
            return None
        seg, off, size = self.slice
        self.taken = True
        return ArenaSlice(seg, off, size, self.freed).array(shape, self.dtype)  # type: ignore[arg-type]


class Staged:
    """What one call took from the arena; ``release()`` once gkcd is done with
    it (its reply came, or the connection closed)."""

    __slots__ = ("arena", "slices", "outs", "keep")

    def __init__(self, arena: "Arena") -> None:
        self.arena = arena
        self.slices: List[Tuple[Segment, int, int]] = []
        self.outs: List[Out] = []
        self.keep: List[np.ndarray] = []

    def release(self) -> None:
        freed = self.arena._freed
        for s in self.slices:
            freed.append(s)
        for o in self.outs:
            if o.slice is not None and not o.taken:
                freed.append(o.slice)
        self.slices, self.outs, self.keep = [], [], []


class Arena:
    """One connection's arena; see the module's docstring."""

    def __init__(self, on: bool, threshold: int, max_bytes: int, why: str) -> None:
        self.threshold = threshold
        self.max_bytes = max_bytes
        self.state = UNUSED if on else DISABLED
        self.reason = why
        self.segments: List[Segment] = []
        self._freed: Deque[Tuple[Segment, int, int]] = collections.deque()
        self._lock = threading.Lock()
        self.growing: Any = None  # an Event while one call grows the arena
        self.reserved = 0        # bytes of the registration under way
        self.limit: Optional[int] = None  # gkcd's largest region, from status
        self.gkcd_reuse = False  # gkcd takes shm_register's "reuse" (its status said so)
        self.frozen = False      # gkcd refused a registration: no more growth
        self.closed = False
        self.logged = False
        self.calls = 0           # calls that used the arena
        self.fallbacks = 0       # calls that wanted it and went inline: no room

    # --- what _api asks -----------------------------------------------------------------

    def wants(self, nbytes: int) -> bool:
        return nbytes >= self.threshold and nbytes > 0 and self.state in (UNUSED, ACTIVE) \
            and not self.closed

    # --- allocation -------------------------------------------------------------------

    def _drain(self) -> None:
        while self._freed:
            seg, off, size = self._freed.popleft()
            if not seg.released:
                seg.give_back(off, size)

    def alloc(self, sizes: List[int]) -> Optional[List[Tuple[Segment, int, int]]]:
        """A slice for each size, or None (and nothing taken) when they do not
        all fit."""
        if self.closed:
            return None
        with self._lock:
            self._drain()
            got: List[Tuple[Segment, int, int]] = []
            for n in sizes:
                n = _align(n)
                for seg in self.segments:
                    off = seg.alloc(n)
                    if off is not None:
                        got.append((seg, off, n))
                        break
                else:
                    for seg, off, m in got:
                        seg.give_back(off, m)
                    return None
            return got

    def has_room(self, nbytes: int) -> bool:
        """Whether a free span of nbytes is there now."""
        n = _align(nbytes)
        with self._lock:
            self._drain()
            return any(span[1] >= n for seg in self.segments for span in seg.free)

    def plan(self, need: int, size_wanted: Optional[int] = None
             ) -> Optional[Tuple[int, List[Segment]]]:
        """The size of a new region that would hold need bytes (size_wanted,
        a kept region's, when given), and idle regions to release first to
        stay within bounds; None if none can."""
        if self.frozen or self.closed or self.state not in (UNUSED, ACTIVE):
            return None
        cap = min(self.max_bytes, self.limit if self.limit is not None else self.max_bytes)
        need = (need + _PAGE - 1) & ~(_PAGE - 1)
        if need > cap:
            return None
        with self._lock:
            self._drain()
            total = sum(s.nbytes for s in self.segments) + self.reserved
            # Geometric growth (each new region as big as all before it), so
            # that a connection settles after a few registrations.
            size = min(1 << (max(need, _MIN_SEGMENT, total) - 1).bit_length(), cap)
            if size_wanted is not None and need <= size_wanted <= cap:
                size = size_wanted
            elif total + size > self.max_bytes:
                size = max(need, (self.max_bytes - total) & ~(_PAGE - 1))
            # Idle regions make room when the bound or the count is reached.
            idle = sorted((s for s in self.segments if s.used == 0), key=lambda s: s.nbytes)
            drop: List[Segment] = []
            count = len(self.segments)
            while total + size > self.max_bytes or count >= _MAX_SEGMENTS:
                if not idle:
                    return None
                s = idle.pop(0)
                drop.append(s)
                total -= s.nbytes
                count -= 1
            for s in drop:
                self.segments.remove(s)
            self.reserved += size
            return size, drop

    def added(self, seg: Optional[Segment], size: int) -> None:
        with self._lock:
            self.reserved -= size
            if seg is not None:
                self.segments.append(seg)
                self.state = ACTIVE

    def refused(self, why: str) -> None:
        """gkcd refused a registration, or no memfd could be made."""
        self.frozen = True
        self.reason = why
        if not self.segments:
            self.state = UNAVAILABLE
        if not self.logged:
            self.logged = True
            log.warning("gkc: no shared memory on this connection (%s): big arrays go "
                        "inline, through the socket", why)

    def close(self) -> None:
        """The connection closed: gkcd let go of the regions; those nothing
        uses here are kept for the next connection (keep)."""
        self.closed = True
        with self._lock:
            # Every slice given back, even to the regions the connection
            # marked released as it closed (_drain skips those).
            while self._freed:
                seg, off, size = self._freed.popleft()
                seg.give_back(off, size)
            for s in self.segments:
                s.retire()
        self.segments = []
        self._freed.clear()

    def info(self) -> Dict[str, Any]:
        with self._lock:
            self._drain()
            return {"state": self.state, "reason": self.reason, "threshold": self.threshold,
                    "max_bytes": self.max_bytes, "regions": [s.id for s in self.segments],
                    "bytes": sum(s.nbytes for s in self.segments),
                    "in_use": sum(s.used for s in self.segments),
                    "calls": self.calls, "fallbacks": self.fallbacks}
