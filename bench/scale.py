#!/usr/bin/env python
"""Scale test of the batched modeler: 1,000,000 series, 1 parameter, 6 points (issue #3).

    .venv/bin/python bench/scale.py [--series 1000000] [--reps 3]

Series are c0 + c1*b(p) with b drawn from the default hypothesis space, 5% multiplicative
uniform noise, p = 4..128.  Times the batched fit (arrays in, arrays out: fit.fit_group) and,
separately, building Model objects for a sample; reports peak memory (ru_maxrss) and the lead
term exactness as a sanity check of the results.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from perfcast.fit import FitOptions, fit_group
from perfcast.fit.terms import DEFAULT_SPACE, block_values


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--noise", type=float, default=0.05)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    x = np.array([4, 8, 16, 32, 64, 128], dtype=float)
    S, R = args.series, args.reps
    blocks = list(DEFAULT_SPACE)
    truth = rng.integers(len(blocks), size=S)
    B = block_values(blocks, x)  # (6, H)
    c0 = 10 ** rng.uniform(0, 3, S)
    share = rng.uniform(0.1, 0.95, S)
    c1 = share / (1 - share) * c0 / B[-1, truth]
    f = c0[:, None] + c1[:, None] * B[:, truth].T  # (S, 6)
    mean = np.zeros_like(f)
    ssd = np.zeros_like(f)
    for r in range(R):  # running mean/ssd without an (S, 6, R) array
        y = f * (1 + rng.uniform(-args.noise, args.noise, f.shape))
        d = y - mean
        mean += d / (r + 1)
        ssd += d * (y - mean)
    count = np.full(f.shape, float(R))
    del f
    t0 = time.perf_counter()
    g = fit_group(x[:, None], mean, count, ssd, ["p"], FitOptions())
    t1 = time.perf_counter()
    sample = rng.choice(S, size=min(S, 2000), replace=False)
    models = [g.model(int(s)) for s in sample]
    t2 = time.perf_counter()
    best = g.hyp[:, 0, 0, 0]
    chosen = np.array([(blocks.index(g.blocks[b]) if b >= 0 else -1) for b in range(len(g.blocks))] + [-1])[best]
    exact = float(np.mean(chosen == truth))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2
    print(f"series {S:,} x {len(x)} points x {R} reps: batched fit {t1 - t0:.1f} s "
          f"({1e6 * (t1 - t0) / S:.1f} us/series); {len(models)} Model objects {1e3 * (t2 - t1) / len(models):.3f} ms each; "
          f"peak RSS {peak:.2f} GB; lead term exact {exact:.1%}  [targets: <= 60 s, <= 4 GB]")
    print("example:", models[0].formula())


if __name__ == "__main__":
    main()
