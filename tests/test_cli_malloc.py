"""The CLI's glibc malloc settings (cli._tune_malloc): set only for glibc and only when the user
set no malloc option of their own; never an error."""
import ctypes

from perfcast import cli


class _Lib:
    """A C library stand-in recording mallopt calls; ``glibc`` decides whether it has glibc's probe."""

    def __init__(self, glibc: bool):
        self.calls = []
        if glibc:
            self.gnu_get_libc_version = lambda: b"2.36"

    def mallopt(self, option, value):
        self.calls.append((option.value, value.value))
        return 1


def _run(monkeypatch, lib, env=None):
    monkeypatch.setattr(ctypes, "CDLL", lambda name: lib)
    for k in list(cli.os.environ):
        if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES":
            monkeypatch.delenv(k)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    cli._tune_malloc()
    return lib.calls


def test_glibc_gets_the_settings(monkeypatch):
    # M_MMAP_THRESHOLD is -3, M_TRIM_THRESHOLD -1 in glibc's malloc.h
    assert sorted(_run(monkeypatch, _Lib(True))) == [(-3, 32 << 20), (-1, 256 << 20)]


def test_another_c_library_is_left_alone(monkeypatch):
    assert _run(monkeypatch, _Lib(False)) == []


def test_the_users_own_malloc_options_win(monkeypatch):
    assert _run(monkeypatch, _Lib(True), {"MALLOC_ARENA_MAX": "2"}) == []
    assert _run(monkeypatch, _Lib(True), {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}) == []


def test_no_c_library_at_all(monkeypatch):
    def fail(name):
        raise OSError("no libc")

    monkeypatch.setattr(ctypes, "CDLL", fail)
    cli._tune_malloc()  # no error


def test_json_records_arrow_buffers_from_the_system_allocator_unless_chosen():
    # a fresh process (pyarrow loaded, as pandas loads it): the pool becomes the C library's; a
    # pool the user chose is kept
    import os
    import subprocess
    import sys

    code = ("import pyarrow; from perfcast import cli; cli._json_arrow_pool(); "
            "print(pyarrow.default_memory_pool().backend_name)")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    run = lambda e: subprocess.run([sys.executable, "-c", code], env=e, capture_output=True,  # noqa: E731
                                   text=True, check=True).stdout.strip()
    assert run(env) == "system"
    assert run({**env, "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}) == "mimalloc"
