"""The shared-memory arena's half of the methods (gkc._api.Api inherits it):
what a call does to stage its big arrays through the connection's arena
(gkc._arena), growing it by registering regions with gkcd, and the
caller's view and control of it (shm_state, shm_info, shm_reserve).

Like the methods, every step that asks gkcd something is a generator that
yields requests (gkc._api.Api._drive runs it on either connection).
"""
from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Tuple

import numpy as np

from . import _arena, errors
from ._arena import In, InPlace, Out, Staged

# Errors that end the connection: a step of the arena's growth passes them on
# (the call fails as any would); any other refusal only means "go inline".
_FATAL = (errors.ConnectionFailed, errors.Timeout, errors.Cancelled)  # type: ignore[attr-defined]
# Refusals of a registration that say "not now" rather than "never".
_TRANSIENT = (errors.Busy, errors.OutOfMemory, errors.DeadlineExceeded)  # type: ignore[attr-defined]


def asyncio_event() -> Any:
    import asyncio  # only asyncio connections need it
    return asyncio.Event()


def _bad(msg: str) -> errors.Error:
    return errors.InvalidArgument(msg)  # type: ignore[attr-defined]


class ArenaCalls:
    """The arena's methods; the connection provides _arena, _regions,
    _is_async, closed and _drive."""

    _arena: Any
    _regions: Dict[int, Any]
    _is_async = False
    closed = False

    # --- the shared-memory arena ------------------------------------------------------

    @property
    def shm_state(self) -> str:
        """``"unused"`` (on, nothing registered yet), ``"active"`` (big arrays
        go through shared memory), ``"disabled"`` (shm=False or GKC_NO_SHM=1)
        or ``"unavailable"`` (descriptors cannot be passed: see shm_reason)."""
        return self._arena.state

    @property
    def shm_reason(self) -> str:
        """Why the arena is off or stopped growing ("" while all is well)."""
        return self._arena.reason

    @property
    def shm_threshold(self) -> int:
        """Arrays of at least this many bytes go through the arena."""
        return self._arena.threshold

    def shm_info(self) -> Dict[str, Any]:
        """The arena now: state, reason, threshold, max_bytes, its region ids,
        their bytes, the bytes in use, and how many calls used it and how
        many went inline for lack of room (fallbacks)."""
        return self._arena.info()

    def shm_reserve(self, nbytes: int) -> Any:
        """Makes the arena hold a free span of at least nbytes now, so that the
        first call of that size pays nothing to set it up: a region made if
        none has room, its pages faulted in (on several threads), registered
        with gkcd (which pins it in the background on the CUDA backend).
        Fresh pages cost the kernel ~0.2-0.7 ms per MiB to hand out, once per
        region.  Raises InvalidArgument when the arena is off or nbytes is
        more than one region may hold, OutOfMemory when its bound leaves no
        room (returns an awaitable on an asyncio connection)."""
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 0:
            raise _bad(f"'nbytes' must be a non-negative int, not {nbytes!r}")
        return self._drive(self._reserve(nbytes))

    def _reserve(self, nbytes: int) -> Any:
        ar = self._arena
        if ar.state not in (_arena.UNUSED, _arena.ACTIVE) or ar.frozen:
            raise _bad(f"shm_reserve: the arena is off: {ar.reason or ar.state}")
        if nbytes == 0 or ar.has_room(nbytes):
            return None
        while ar.growing is not None:
            yield (None, ar.growing)
        if ar.has_room(nbytes):
            return None
        ar.growing = asyncio_event() if self._is_async else threading.Event()
        try:
            ok = yield from self._add_segment(_arena._align(nbytes), populate=True)
        finally:
            ev, ar.growing = ar.growing, None
            ev.set()
        if not ok:
            cap = min(ar.max_bytes, ar.limit if ar.limit is not None else ar.max_bytes)
            if nbytes > cap:
                raise _bad(f"shm_reserve: {nbytes} bytes is more than one region may hold ({cap}:"
                           " the smaller of shm_max_bytes and gkcd's --max-request-bytes)")
            raise errors.OutOfMemory(  # type: ignore[attr-defined]
                f"shm_reserve: no room for a {nbytes}-byte region: "
                + (ar.reason or f"the arena may hold {ar.max_bytes} bytes and those in use stay"))
        return None

    @staticmethod
    def _staging(params: Dict[str, Any]) -> bool:
        """Whether params hold anything for the arena (_stage has work)."""
        for v in params.values():
            if isinstance(v, (In, InPlace)):
                return True
        o = params.get("out")
        return isinstance(o, dict) and any(isinstance(v, Out) for v in o.values())

    def _stage(self, params: Dict[str, Any]) -> Any:
        """Gives the arena's placeholders in params (In, InPlace, Out) their
        slices, or turns them back into inline bytes, growing the arena first
        when that may help.  A generator as for _drive (a growth is a request
        or two); returns the Staged to release once the reply is in, or None."""
        ar = self._arena
        staged = Staged(ar)
        ins: List[Tuple[str, In]] = []
        sizes: List[int] = []
        for k, v in params.items():
            if type(v) is In:
                ins.append((k, v))
                sizes.append(v.nbytes)
            elif type(v) is InPlace:
                params[k] = v.ref
                staged.keep.append(v.a)
        outmap = params.get("out")
        outs: List[Tuple[str, Out]] = []
        if type(outmap) is dict:
            for k, v in outmap.items():
                if type(v) is Out:
                    outs.append((k, v))
                    sizes.append(v.nbytes)
        if not sizes:
            return staged
        got = ar.alloc(sizes)
        if got is None:
            got = yield from self._grow(sizes)
        if got is None:
            if ar.state in (_arena.UNUSED, _arena.ACTIVE):
                ar.fallbacks += 1
            for k, v in ins:
                params[k] = v.inline()
            for k, _ in outs:
                del outmap[k]
            if outs and not outmap:
                del params["out"]
            return staged
        ar.calls += 1
        for (k, v), sl in zip(ins, got):
            seg, off = sl[0], sl[1]
            if seg.fresh(off, sl[2]):
                _arena.populate(seg._mm, v.nbytes, off)
            _arena.copy_into(np.ndarray(v.a.shape, v.dtype, seg._mm, off), v.a)
            params[k] = {"region": seg.id, "offset": off, "bytes": v.nbytes}
            staged.slices.append(sl)
        for (k, v), sl in zip(outs, got[len(ins):]):
            # gkcd writes it: its pages allocated here, on several threads,
            # rather than by faults on gkcd's one worker.
            if sl[0].fresh(sl[1], sl[2]):
                _arena.populate(sl[0]._mm, v.nbytes, sl[1])
            v.slice, v.freed = sl, ar._freed
            outmap[k] = {"region": sl[0].id, "offset": sl[1]}
            staged.outs.append(v)
        return staged

    def _grow(self, sizes: Any) -> Any:
        """Slices for sizes once the arena has grown enough to hold them, or
        None when it cannot (no room within the bounds, or no shared memory
        at all).  One call grows the arena at a time; the others wait for it
        and try again, rather than each registering a region of its own."""
        ar = self._arena
        while True:
            if ar.frozen or self.closed or ar.state not in (_arena.UNUSED, _arena.ACTIVE):
                return None
            if ar.growing is not None:
                yield (None, ar.growing)  # the drivers wait for it
            else:
                ar.growing = asyncio_event() if self._is_async else threading.Event()
                try:
                    if not (yield from self._add_segment(sum(_arena._align(n) for n in sizes))):
                        return None
                finally:
                    ev, ar.growing = ar.growing, None
                    ev.set()
            got = ar.alloc(sizes)
            if got is not None:
                return got

    def _add_segment(self, need: int, populate: bool = False) -> Any:
        """Registers one more arena region with room for need bytes (releasing
        idle ones first if the bounds say so); False when it cannot.
        populate: its pages are faulted in before gkcd maps (and pins) them."""
        ar = self._arena
        if ar.limit is None:
            # gkcd refuses a region over --max-request-bytes, and holds its
            # bytes against --memory-budget while it maps it (one that takes
            # most of the budget would wait for all of it): learn both once.
            try:
                st = yield ("status", {}, lambda res: res)
            except errors.Error as e:
                if isinstance(e, _FATAL):
                    raise
                st = {}
            lim = st.get("limits", {}) if isinstance(st, dict) else {}
            ar.limit = min(int(lim.get("max_request_bytes", ar.max_bytes)),
                           int(lim.get("memory_budget", 2 * ar.max_bytes)) // 2)
            # A gkcd that keeps registrations says so (an older one refuses "reuse").
            res = st.get("resident", {}) if isinstance(st, dict) else {}
            ar.gkcd_reuse = isinstance(res, dict) and "regions_kept_hits" in res
        # A region an earlier connection of this process left, its pages
        # there already: the smallest that holds need within the bounds.
        cap = min(ar.max_bytes, ar.limit)
        kept = _arena.kept_size(need, cap)
        plan = ar.plan(need, kept) if kept is not None else None
        if plan is None:
            plan = ar.plan(need)
        if plan is None:
            return False
        size, drop = plan
        seg = None
        try:
            for old in drop:
                old._mark_released()
                try:
                    yield ("shm_release", {"region": old.id}, lambda res: None)
                    old.retire()  # idle, and gkcd let go of it
                except errors.Error as e:
                    if isinstance(e, _FATAL):
                        raise
            from ._transport import make_memfd
            got = _arena.take_kept(size) if size == kept else None
            if got is not None:
                mm, keep_fd, head = got
                fd = os.dup(keep_fd)
            else:
                try:
                    fd, mm = make_memfd(size, "gkc-arena")
                except errors.Error as e:
                    ar.refused(e.message)
                    return False
                try:
                    keep_fd = os.dup(fd)  # the one sent is closed once sent
                except OSError:
                    keep_fd = -1
                head = 0
            # The pages the call that grows it takes (all of them for
            # shm_reserve), before gkcd maps them: the call's copy then meets
            # no faults, and gkcd finds them there.
            want = size if populate else min(need, size)
            if want > head:
                _arena.populate(mm, want - head, head)
                head = want
            try:
                # Set up ahead (shm_reserve): gkcd registers it for DMA before
                # answering too, so nothing of it is left for the first call.
                # "reuse": kept with the process for its next connection (_arena.keep)
                params = {"bytes": size}
                if ar.gkcd_reuse:
                    params["reuse"] = True
                if populate:
                    params["pinned"] = True
                seg = yield ("shm_register", params,
                             lambda res: _arena.Segment(self, int(res["region"]), mm, size,
                                                        keep_fd), fd)
            except errors.Error as e:
                if keep_fd >= 0:
                    os.close(keep_fd)
                mm.close()
                if isinstance(e, _FATAL):
                    raise
                if isinstance(e, _TRANSIENT):
                    return False  # gkcd is short of memory now: this call goes inline
                ar.refused(f"gkcd refused shm_register: {e.message}")
                return False
            seg.pop_head = head
            self._regions[seg.id] = seg
        finally:
            ar.added(seg, size)
        return True
