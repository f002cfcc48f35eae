"""Kill writers of one store at many moments; print one JSON line per kill point.

Used by test_store_safety.py: ``python store_killer.py DEST A.csv B.csv MODE COUNT [SEED]``.
DEST holds A; a writer replacing it by B is SIGKILLed, then a forked checker reads DEST (was it
there? A or B?), a clean write of A follows and what else is left beside DEST is listed.

MODE ``lines``: the writer kills itself at line event k of perfcast/store.py -- every line of
_replace/_recover_locked (where the renames happen) and COUNT others spread over
all of it (COUNT <= 0: every line). MODE ``random``: COUNT times a writer replacing the store in a
loop is killed from outside at a random moment. A ``-fallback`` suffix makes renameat2 unsupported.
The parent only forks (it never touches pyarrow, so forking is safe); children do the I/O.
"""
import errno
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

from perfcast import store
from perfcast.io import _load_modules, load as _load

_load_modules()  # import every reader once, before forking (imports only: no pyarrow threads yet)

dest, csv_a, csv_b, mode, count = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
seed = int(sys.argv[6]) if len(sys.argv) > 6 else 0
if mode.endswith("fallback"):
    def no_exchange(a, b, **kw):
        raise OSError(errno.EINVAL, "exchange unsupported (test)")
    store.exchange = no_exchange


def load(csv):
    return _load([csv])


def forked(fn):
    """Run fn in a forked child (the parent never touches pyarrow, so forking stays safe)."""
    pid = os.fork()
    if pid == 0:
        try:
            code = fn() or 0
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 99
        os._exit(code)
    return pid


def wait(pid):
    _, status = os.waitpid(pid, 0)
    return status


def others():
    return sorted(n for n in os.listdir(dest.parent) if n.startswith(f".{dest.name}."))


def check():
    """Exit code: +100 when dest was missing before reading; 10 = A, 11 = B, 30 = unreadable."""
    def body():
        existed = os.path.isdir(dest)
        try:
            e = store.read(dest)
        except Exception:
            return 30 + (0 if existed else 100)
        which = 10 if e.equals(load(csv_a)) else 11 if e.equals(load(csv_b)) else 30
        return which + (0 if existed else 100)
    code = os.waitstatus_to_exitcode(wait(forked(body)))
    return {"existed": code < 100, "which": {10: "A", 11: "B"}.get(code % 100)}


def write_plain(csv):
    return os.waitstatus_to_exitcode(wait(forked(lambda: store.write(load(csv), dest) and 0)))


def traced_write(k, csv, count_file=None):
    def body():
        e = load(csv)
        n = 0
        fname = store.__file__

        funcs = []

        def tracer(frame, event, arg):
            nonlocal n
            if frame.f_code.co_filename != fname:
                return None
            if event == "line":
                n += 1
                funcs.append(frame.f_code.co_name)
                if n == k:
                    os.kill(os.getpid(), signal.SIGKILL)
            return tracer

        sys.settrace(tracer)
        store.write(e, dest)
        sys.settrace(None)
        if count_file:
            Path(count_file).write_text(json.dumps(funcs))
    return wait(forked(body))


def record(k, status):
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    rec = {"k": k, "killed": killed, "exit": None if killed else os.waitstatus_to_exitcode(status)}
    rec.update(check())
    rec["after_kill"] = others()
    rec["clean_write"] = write_plain(csv_a)
    rec["after_write"] = others()
    rec["after_write_is"] = check()["which"]
    print(json.dumps(rec), flush=True)


assert write_plain(csv_a) == 0
if mode.startswith("lines"):
    # every line of perfcast/store.py a replacing writer executes is a kill point
    calib = dest.parent / "count"
    assert os.waitstatus_to_exitcode(traced_write(0, csv_b, calib)) == 0
    funcs = json.loads(calib.read_text())
    calib.unlink()
    assert write_plain(csv_a) == 0
    n = len(funcs)
    critical = {k for k, f in enumerate(funcs, 1) if f in ("_replace", "_recover_locked")}
    points = set(range(1, n + 1)) if count <= 0 else critical | {1 + (i * n) // count for i in range(count)}
    print(json.dumps({"lines": n, "points": len(points)}), flush=True)
    for k in sorted(points):
        record(k, traced_write(k, csv_b))
else:
    # SIGKILL from outside at a random moment of a writer replacing the store in a loop
    rng = random.Random(seed)
    journal = dest.parent / "journal"
    for i in range(count):
        journal.write_text("")

        def loop():
            exps = [load(csv_b), load(csv_a)]
            j = 0
            while True:
                store.write(exps[j % 2], dest)
                j += 1
                with open(journal, "a") as f:
                    f.write("w\n")

        pid = forked(loop)
        target = rng.randint(1, 3)
        deadline = time.monotonic() + 120
        while journal.read_text().count("\n") < target and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.03))  # a random moment inside one of the next writes
        os.kill(pid, signal.SIGKILL)
        record(i, wait(pid))
    journal.unlink()
