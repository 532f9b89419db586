"""How many CPUs this process may use: the sweeps' worker processes and the audit's simulation threads ask here."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """The CPUs this process may run on (the affinity mask where there is one).

    Returns
    -------
    int
        At least 1.
    """
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
