#!/usr/bin/env bash
# The main job on the bundled default: profile the example MPI Jacobi solver (weak scaling: n x n
# points per rank) at several process counts and sizes, model every kernel and MPI routine,
# predict a larger run, measure that run and compare, write the HTML report; then the projection
# onto other machines, checked on published SPEC CPU2017 results. Rerunning resumes the campaigns
# (completed runs are kept) and rewrites models and report.
set -euo pipefail
cd "$(dirname "$0")/.."
PERFCAST=${PERFCAST:-.venv/bin/perfcast}
OUT=${DEMO_OUT:-demo-out}
EXP="$OUT/jacobi.perfcast"
TARGET=${DEMO_TARGET:-p=16,n=256}
mkdir -p "$OUT"

echo "== building the example applications (examples/)"
make -s -C examples

cores=$(nproc)
PS=${DEMO_PROCS:-1,2,3,4,6,8,9}
echo "== profiling examples/jacobi: p=$PS ranks x n=64..256 points per rank (timers + PMPI),"
echo "   each configuration repeated until its runtime varies by <5% (3..6 runs)"
[ "$cores" -lt 9 ] && echo "   note: this machine has $cores cores, so runs with more ranks are oversubscribed:" \
  "their times include waiting for descheduled ranks (message counts and bytes are exact)"
"$PERFCAST" collect -o "$EXP" -P p="$PS" -P n=64,128,192,256 --reps 3..6 --cv 0.05 --cv-metric total \
  --collect time,mpi -- mpirun -np {p} examples/jacobi/jacobi -w {n} -i 100 -q

echo "== what was measured"
"$PERFCAST" show "$EXP" --max-callpaths 30

echo "== scaling models of the application's timers and the MPI traffic, ranked as scalability bugs"
"$PERFCAST" model "$EXP" --target "$TARGET" --metric time --metric bytes --limit 20 | tee "$OUT/models.txt"
"$PERFCAST" model "$EXP" --target "$TARGET" --json > "$OUT/models.json"

echo "== prediction at $TARGET (never measured)"
"$PERFCAST" predict "$EXP" --at "$TARGET" --callpath 'app*' --callpath 'MPI' --metric time --metric bytes \
  | tee "$OUT/prediction.txt"

echo "== the check: measure $TARGET now and compare with the prediction made without it"
echo "   1. message counts and bytes are deterministic (the same in every run, whatever the cores):"
echo "      what the check shows is the models' own error"
CHECK="$OUT/jacobi-target.perfcast"
grid=()
IFS=, read -ra kv <<< "$TARGET"
for x in "${kv[@]}"; do grid+=(-P "$x"); done
"$PERFCAST" collect -o "$CHECK" "${grid[@]}" --reps 3..6 --cv 0.05 --cv-metric total --collect time,mpi \
  -- mpirun -np {p} examples/jacobi/jacobi -w {n} -i 100 -q
"$PERFCAST" predict "$EXP" --validate "$CHECK" --callpath 'MPI*' --metric calls --metric bytes \
  | tee "$OUT/check.txt"
echo "   2. times: $TARGET has more ranks than this machine's $cores cores, so its times measure descheduling"
echo "      (said below); a time check this machine can make: a larger problem within the cores, predicted"
echo "      from the runs within the cores only (--where p=...)"
TCHECK="$OUT/jacobi-within-cores.perfcast"
TPOINT="p=$cores,n=${DEMO_CHECK_N:-384}"
tgrid=()
IFS=, read -ra kv <<< "$TPOINT"
for x in "${kv[@]}"; do tgrid+=(-P "$x"); done
within=()
for ((q = 1; q <= cores; q++)); do within+=(--where "p=$q"); done
"$PERFCAST" collect -o "$TCHECK" "${tgrid[@]}" --reps 3..6 --cv 0.05 --cv-metric total --collect time,mpi \
  -- mpirun -np {p} examples/jacobi/jacobi -w {n} -i 100 -q
"$PERFCAST" predict "$EXP" "${within[@]}" --validate "$TCHECK" --callpath 'app*' --metric time \
  2>&1 | tee "$OUT/check-times.txt"
echo "   3. the times at $TARGET, for the record (oversubscribed on both sides: not a test of the model)"
"$PERFCAST" predict "$EXP" --validate "$CHECK" --callpath 'app' --metric time 2>&1 | tee "$OUT/check-oversubscribed.txt"

# the target: the largest n per rank whose working set stays within the last-level cache (probed),
# the grid n/64..n/2 below it, the iterations that keep the runs' work (scripts/demo_target.py says why)
ADAPT=$("${PYTHON:-.venv/bin/python}" scripts/demo_target.py "$cores")
AN=$(sed -n 1p <<< "$ADAPT")
AGRID=$(sed -n 2p <<< "$ADAPT")
AITERS=$(sed -n 3p <<< "$ADAPT")
echo "== adaptive campaign: measure only what the prediction at n=$AN points per rank (p=$cores) needs:"
echo "   a start design, then one run at a time where perfcast advise says, until the 90% interval of the"
echo "   predicted run time is within 10% of it at three fits in a row, or the budget (core-hours: wall time x"
echo "   processes; a run that reaches it is stopped) is spent"
echo "   $(sed -n 4p <<< "$ADAPT") ($AITERS iterations a run)"
# named by the target: a demo-out of an earlier design (another target) keeps its campaign, and
# rerunning resumes this one instead of refusing a directory that holds a different campaign
ACAMP="$OUT/jacobi-adaptive-n$AN.perfcast"
ABUDGET=${DEMO_ADAPTIVE_BUDGET:-$(awk -v c="$cores" 'BEGIN { print 0.005 * c }')}
"$PERFCAST" collect --adaptive --target "p=$cores,n=$AN" --budget "$ABUDGET" --until 10% \
  -o "$ACAMP" -P p="$cores" -P n="$AGRID" --reps 2..4 --cv 0.05 --cv-metric total \
  -- mpirun -np {p} examples/jacobi/jacobi -w {n} -i "$AITERS" -q 2>&1 | tee "$OUT/adaptive.txt"
echo "   its check: measure n=$AN now (within the cores) and compare with what the campaign predicted"
ACHECK="$OUT/jacobi-adaptive-n$AN-target.perfcast"
"$PERFCAST" collect -o "$ACHECK" -P p="$cores" -P n="$AN" --reps 2..4 --cv 0.05 --cv-metric total \
  -- mpirun -np {p} examples/jacobi/jacobi -w {n} -i "$AITERS" -q
"$PERFCAST" predict "$ACAMP" --validate "$ACHECK" --callpath 'app' --metric time \
  2>&1 | tee "$OUT/adaptive-check.txt"

echo "== APMT breakdown: instruction counts of the solver's own functions (cachegrind, one run per"
echo "   configuration at small sizes; MPI start-up left out with --cachegrind-toggle) + timers + PMPI"
APMT="$OUT/jacobi-apmt.perfcast"
"$PERFCAST" collect -o "$APMT" -P p=1,2,3,4 -P n=32,48,64 --reps 2..3 --cv 0.05 --cv-metric total \
  --collect time,mpi,cachegrind --cachegrind-toggle compute_sweep --cachegrind-toggle halo_exchange \
  --cachegrind-toggle reduce_residual -- mpirun -np {p} examples/jacobi/jacobi -w {n} -i 100 -q
echo "== prediction at $TARGET with a computation / memory / communication breakdown (APMT;"
echo "   communication times fitted on runs with p <= $cores cores: oversubscribed runs measure descheduling)"
echo "   (next to the run time predicted from the timing campaign above, and checked against the run"
echo "   measured at $TARGET: which estimate was closer)"
"$PERFCAST" predict "$APMT" --breakdown --at "$TARGET" --timer 'compute_sweep=app->compute' \
  --comm-max-procs "$cores" --validate "$CHECK" --run-times "$EXP" | tee "$OUT/breakdown.txt"

echo "== reports"
"$PERFCAST" report "$EXP" -o "$OUT/report.html" --force --target "$TARGET" --validate "$CHECK"
"$PERFCAST" report "$APMT" -o "$OUT/apmt-report.html" --force --target "$TARGET" --timer 'compute_sweep=app->compute' \
  --comm-max-procs "$cores" --validate "$CHECK" --run-times "$EXP"

echo "== projection onto machines never touched: this VM is not among the published systems, so the"
echo "   compute projection is shown on published data -- each SPEC CPU2017 FP benchmark in turn is the"
echo "   application, projected between 100 random pairs of the 5331 published systems from the other 12"
echo "   FP benchmarks and the 10 integer ones (data/README.md)"
echo "   (perfcast project EXP --base SYSTEM --target SYSTEM does this for an application's counters)"
# the library's one rule ($PERFCAST_SHARED_DATA, else shared/data beside the checkout)
SHARED=$("${PYTHON:-.venv/bin/python}" -c 'from perfcast.shared_data import shared_data_dir; print(shared_data_dir())')
if [ -f "$SHARED/spec/spec17ml_input_FP_rate.csv" ]; then
  "${PYTHON:-.venv/bin/python}" bench/projection_closed_loop.py --fast --pairs 100 \
    | tee "$OUT/projection-closed-loop.txt"
else
  echo "   skipped: the published SPEC tables are not at $SHARED/spec (set PERFCAST_SHARED_DATA)"
fi

echo "report written: $(cd "$OUT" && pwd)/report.html"
echo "APMT report (breakdown vs process count): $(cd "$OUT" && pwd)/apmt-report.html"
