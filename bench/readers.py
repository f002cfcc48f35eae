"""Peak memory of the readers against the file they read (issue 17, item 2: "readers that stream ...
peak memory <= 3x the file").

    .venv/bin/python bench/readers.py                          # 250k series in every format
    .venv/bin/python bench/readers.py --series 100000 --json   # smaller; also `show --json`
    .venv/bin/python bench/readers.py --files /tmp/s/big.txt /tmp/s/big.csv --src /some/checkout/src

Each measurement is one subprocess ``python -m perfcast show FILE`` (what a user runs: interpreter
start and imports included, stdout to a file), measured with ``os.wait4`` (bench/cli_scale.py's
``run_measured``): CPU time (user + system), wall time, peak RSS of the child, and the ratio peak RSS /
file size with the target (<= 3x).  Inputs (cached in ``bench/out/readers/``): one set of series (6
points p = 4..128, 5 repetitions, 5% noise, truths as bench/vs_extrap.py) written as an Extra-P text
file (bench/cli_scale.py's generator), a tidy CSV, tidy JSON Lines (both ``%.6g`` values, written by
one %-format per chunk) and a tidy Parquet file (from the CSV, row groups of 1M rows).  ``--files``
measures given files instead; ``--src`` puts another source tree first on PYTHONPATH (a checkout of
an earlier commit: before/after on the same files).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cli_scale  # noqa: E402

OUT = HERE / "out" / "readers"
TARGET = 3.0


def write_tidy(base: Path, series: int, seed: int = 1, chunk: int = 20_000) -> dict[str, Path]:
    """Tidy CSV, JSON Lines and Parquet files of ``series`` series (the values the text generator
    draws, a row per value)."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    paths = {"tidy": base.with_suffix(".csv"), "tidy-jsonl": base.with_suffix(".jsonl"),
             "tidy-parquet": base.with_suffix(".parquet")}
    if all(p.exists() for p in paths.values()):
        return paths
    rng = np.random.default_rng(seed + 1000)
    pts = [pt[0] for pt in cli_scale.points(1)]
    reps = cli_scale.REPS
    csv_row = "%d,r%d,time,%.6g\n"
    json_row = '{"p": %d, "callpath": "r%d", "metric": "time", "value": %.6g}\n'
    tmp = {k: p.with_suffix(p.suffix + ".tmp") for k, p in paths.items()}
    with open(tmp["tidy"], "w") as fc, open(tmp["tidy-jsonl"], "w") as fj:
        fc.write("p,callpath,metric,value\n")
        for a in range(0, series, chunk):
            m = min(chunk, series - a)
            f = cli_scale.truth_values(rng, 1, m)
            y = f[:, :, None] * (1 + rng.uniform(-cli_scale.NOISE / 2, cli_scale.NOISE / 2, size=(m, len(pts), reps)))
            rows = np.empty((m, len(pts), reps, 3), dtype=object)
            rows[..., 0] = np.array(pts)[None, :, None]
            rows[..., 1] = np.arange(a, a + m)[:, None, None]
            rows[..., 2] = y
            flat = tuple(rows.ravel().tolist())
            n = m * len(pts) * reps
            fc.write((csv_row * n) % flat)
            fj.write((json_row * n) % flat)
    with pcsv.open_csv(tmp["tidy"]) as reader:
        writer = None
        for batch in reader:
            if writer is None:
                writer = pq.ParquetWriter(tmp["tidy-parquet"], batch.schema)
            writer.write_batch(batch, row_group_size=1 << 20)
        writer.close()
    for k, p in paths.items():
        tmp[k].replace(p)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--series", type=int, default=250_000, help="series in the generated files")
    ap.add_argument("--files", nargs="*", type=Path, help="measure these files instead of generated ones")
    ap.add_argument("--json", action="store_true", help="also measure `show --json`")
    ap.add_argument("--src", type=Path, default=HERE.parent / "src", help="source tree to run (PYTHONPATH)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args(argv)

    if args.files:
        files = [(None, f) for f in args.files]
    else:
        OUT.mkdir(parents=True, exist_ok=True)
        text, _, _ = cli_scale.experiment_file(1, args.series)
        tidy = write_tidy(OUT / f"sp-{args.series}", args.series)
        files = [("extrap-text", text), *tidy.items()]
    env_src = str(args.src.resolve())
    os.environ["PYTHONPATH"] = env_src + os.pathsep + os.environ.get("PYTHONPATH", "")
    commands = [["show"], ["show", "--json"]] if args.json else [["show"]]
    print(f"source: {env_src}   python: {args.python}   target: peak RSS <= {TARGET:g}x the file")
    print(f"| {'command':12} | {'file':34} | {'MB':>7} | {'cpu s':>6} | {'wall s':>6} | {'peak MB':>7} | "
          f"{'peak/file':>9} | status")
    print(f"|{'-' * 14}|{'-' * 36}|{'-' * 9}|{'-' * 8}|{'-' * 8}|{'-' * 9}|{'-' * 11}|-------")
    worst = 0
    with tempfile.TemporaryDirectory() as work:
        for _, path in files:
            size_mb = path.stat().st_size / 1e6
            for cmd in commands:
                r = cli_scale.run_measured([args.python, "-m", "perfcast", *cmd, str(path)],
                                           Path(work) / "out.txt", args.timeout, 0)
                ratio = r["maxrss_mb"] / size_mb
                ok = r["exit"] == 0 and r["killed"] is None
                status = ("PASS" if ratio <= TARGET else "FAIL") if ok else f"error: {r.get('error') or r['killed']}"
                worst = max(worst, 0 if status == "PASS" else 1)
                print(f"| {' '.join(cmd):12} | {str(path)[-34:]:34} | {size_mb:7.1f} | {r['cpu_s']:6.2f} | "
                      f"{r['wall_s']:6.2f} | {r['maxrss_mb']:7.0f} | {ratio:8.2f}x | {status}", flush=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
