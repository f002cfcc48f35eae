"""The target of make demo's adaptive campaign (scripts/demo.sh): examples/jacobi under weak scaling
(-w n: n x n points per rank) at p ranks, at the largest n whose working set stays within half of
this machine's last-level cache, with the campaign's grid n/64 .. n/2 below it.

Why: the campaign's check measures the target and compares it with the prediction.  A target whose
arrays outgrow the last-level cache while every measured point fits tests the cache step, not the
model (on a VM with a 32 MiB L3 the old target n = 1024, 48 MiB for 2 ranks, was measured 31-40%
above predictions fitted on n <= 512).

The working set is jacobi's own (examples/jacobi/jacobi.c, compute_sweep): each sweep streams three
(n + 2) x (n + 2) arrays of doubles per rank -- u and f read, unew written (the halo included; the
fourth array, sol, is touched only before and after the timed loop).  Half the cache, not all of
it: the MPI library, the halo buffers, the other processes on the machine and a replacement policy
that is not an ideal LRU use the rest (a streamed working set just below the capacity already
misses).  The cache size is probed (perfcast.collect.machine.last_level_cache, sysfs); when sysfs
gives none, the old target n = 1024 is kept and the reason says the check may measure the cache.

Usage: demo_target.py PROCS  ->  four lines: n, the grid (comma-separated), the iterations (-i, the old
design's work: iterations()), the one-line reason.
"""

from __future__ import annotations

import math
import sys

#: arrays of doubles jacobi's sweep streams per rank (u, f, unew), each (n + 2)^2 with the halo
ARRAYS = 3
#: the share of the last-level cache the working set may fill (half: the reason line says so)
FRACTION = 0.5
#: the grid: the target divided by 2, 4, ..., 2^STEPS (the old design: 16..512 below 1024)
STEPS = 6
#: the target when the cache size is unknown (the demo's design before the cache was probed)
FALLBACK = 1024
#: the old design's iterations (-i) at its target n = FALLBACK
ITERATIONS = 1000


def iterations(n: int) -> int:
    """Jacobi iterations (-i) that keep the work of the old design (ITERATIONS sweeps at n = 1024):
    ITERATIONS * (1024 / n)^2, to the nearest hundred, at least ITERATIONS.  A smaller target with
    the same -i would shrink every run's compute next to mpirun's fixed start-up (~0.3 s), so the
    fits would see mostly start-up noise; the same work keeps the runs' costs, the budget's reach
    and the demo's run time as they were."""
    return max(ITERATIONS, int(round(ITERATIONS * (FALLBACK / n) ** 2, -2)))


def working_set(n: int, procs: int, arrays: int = ARRAYS) -> int:
    """Bytes jacobi -w n's sweep streams, over all ``procs`` ranks."""
    return procs * arrays * (n + 2) ** 2 * 8


def largest_n(cache_bytes: int, procs: int, arrays: int = ARRAYS, fraction: float = FRACTION) -> int:
    """The largest n with ``working_set(n, procs) <= fraction * cache_bytes``."""
    return math.isqrt(int(fraction * cache_bytes / (procs * arrays * 8))) - 2


def grid_below(n: int, steps: int = STEPS) -> list[int]:
    """n / 2^steps .. n / 2 (integer division), without repeats or values below 2."""
    return sorted({n >> k for k in range(1, steps + 1) if n >> k >= 2})


def _mib(b: float) -> str:
    return f"{b / 2**20:.1f} MiB"


def target(procs: int, llc: dict | None) -> tuple[int, list[int], str]:
    """(n, grid, reason) for ``procs`` ranks and the last-level cache ``llc``
    (:func:`perfcast.collect.machine.last_level_cache`'s dict, or None when unknown)."""
    if llc is None:
        n = FALLBACK
        return n, grid_below(n), (f"the last-level cache size is unknown (sysfs gives none): target n={n} as before; "
                                  f"its working set ({procs} ranks x {ARRAYS} arrays x {n + 2}^2 doubles = "
                                  f"{_mib(working_set(n, procs))}) may exceed the cache, and then the check measures "
                                  f"the cache, not the model")
    cache = llc["total"]
    n = largest_n(cache, procs)
    grid = grid_below(n)
    where = f"L{llc['level']}" + (f", {llc['instances']} instances" if llc["instances"] > 1 else "")
    return n, grid, (f"target n={n}: the largest whose working set ({procs} ranks x {ARRAYS} arrays x {n + 2}^2 "
                     f"doubles = {_mib(working_set(n, procs))}) is within half of this machine's last-level cache "
                     f"({_mib(cache)}, {where}, sysfs), like every grid point's (n={grid[0]}..{grid[-1]}): the "
                     f"check does not measure a step from the cache to main memory")


def main(argv: list[str]) -> int:
    from perfcast.collect.machine import last_level_cache

    if len(argv) != 1 or not argv[0].isdigit() or int(argv[0]) < 1:
        print("usage: demo_target.py PROCS (a process count >= 1)", file=sys.stderr)
        return 2
    n, grid, why = target(int(argv[0]), last_level_cache())
    print(n)
    print(",".join(map(str, grid)))
    print(iterations(n))
    print(why)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
