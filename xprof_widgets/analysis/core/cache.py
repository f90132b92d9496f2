"""One way to keep what an analysis derived: computed once per run or per host file.

XProf builds its OpStats once per host and every tool reads them; here the op statistics,
the HLO modules, the step grouping, the trace layout and the allocator events are kept on
the object they come from (a `Run`, or an `XSpaceFile` for one host), under a key, by
`derived`. `per_run` makes a function of a run compute once per run.
"""

from __future__ import annotations

import functools
import threading

_LOCK = threading.Lock()  # guards the per-key locks only, never held while computing


def derived(owner, key, compute):
    """`compute()`, once per `owner` and `key`: kept on `owner` for its lifetime.

    ProfileWidget may read a run in a thread while the kernel asks for a tool, and an
    analysis may compute one derived value in a thread while its caller computes
    another: each key has its own lock, so two keys never wait on each other.
    """
    store = owner.__dict__.setdefault("_derived", {})
    if key in store:
        return store[key]
    with _LOCK:
        lock = owner.__dict__.setdefault("_derived_locks", {}).setdefault(key, threading.RLock())
    with lock:
        if key not in store:
            store[key] = compute()
    return store[key]


def kept(owner, key) -> bool:
    """Whether `derived(owner, key, ...)` has its value already (nothing is computed)."""
    return key in owner.__dict__.get("_derived", {})


def per_run(function):
    """`function(run)` computed once per run (the result is shared: do not change it)."""

    @functools.wraps(function)
    def once(run):
        return derived(run, function.__qualname__, lambda: function(run))

    return once
