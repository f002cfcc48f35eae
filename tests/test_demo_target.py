"""make demo's adaptive target (scripts/demo_target.py) and the last-level cache it is sized by
(perfcast.collect.machine.last_level_cache), against hand calculations.

The demo's adaptive check used to measure n = 1024 points per rank of examples/jacobi on 2 ranks:
48 MiB of arrays on a VM with a 32 MiB L3, while every measured point (n <= 512) fitted in it; the
check measured the cache step (predicted 1.46-1.59 s, measured 2.41-2.64 s)."""

import importlib.util
from pathlib import Path

import pytest

from perfcast.collect import machine

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _demo_target():
    spec = importlib.util.spec_from_file_location("demo_target", SCRIPTS / "demo_target.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _cache(root: Path, cpu: int, index: int, level: int, kind: str, size: str, shared: str | None):
    d = root / f"cpu{cpu}" / "cache" / f"index{index}"
    d.mkdir(parents=True)
    (d / "level").write_text(f"{level}\n")
    (d / "type").write_text(f"{kind}\n")
    (d / "size").write_text(f"{size}\n")
    if shared is not None:
        (d / "shared_cpu_list").write_text(f"{shared}\n")


@pytest.fixture
def two_l3(tmp_path):
    """4 CPUs: private L1d/L1i (32K) and L2 (512K) each; CPUs 0-1 share one 16 MiB L3, 2-3 another."""
    for c in range(4):
        _cache(tmp_path, c, 0, 1, "Data", "32K", str(c))
        _cache(tmp_path, c, 1, 1, "Instruction", "32K", str(c))
        _cache(tmp_path, c, 2, 2, "Unified", "512K", str(c))
        _cache(tmp_path, c, 3, 3, "Unified", "16384K", "0-1" if c < 2 else "2-3")
    return tmp_path


def test_last_level_cache_counts_each_shared_instance_once(two_l3):
    # all 4 CPUs: the two L3s, 16 MiB each = 32 MiB; the L2s (level 2) are not the last level
    assert machine.last_level_cache(cpus=range(4), root=two_l3) == {
        "level": 3, "size": 16 * 2**20, "instances": 2, "total": 32 * 2**20}
    # CPUs 0 and 1 share one of them
    assert machine.last_level_cache(cpus=[0, 1], root=two_l3) == {
        "level": 3, "size": 16 * 2**20, "instances": 1, "total": 16 * 2**20}
    # one CPU of each pair: both instances
    assert machine.last_level_cache(cpus=[1, 2], root=two_l3)["total"] == 32 * 2**20


def test_last_level_cache_without_sharing_lists_and_without_sysfs(tmp_path):
    # per-CPU caches without shared_cpu_list ("1M" = 2^20 bytes): one per CPU; instruction caches ignored
    for c in range(2):
        _cache(tmp_path, c, 0, 2, "Unified", "1M", None)
        _cache(tmp_path, c, 1, 3, "Instruction", "64M", None)
    assert machine.last_level_cache(cpus=[0, 1], root=tmp_path) == {
        "level": 2, "size": 2**20, "instances": 2, "total": 2 * 2**20}
    # no cache information at all: unknown, not a guess
    assert machine.last_level_cache(cpus=[0, 1], root=tmp_path / "none") is None


def test_demo_target_is_the_largest_n_within_half_the_cache_by_hand():
    dt = _demo_target()
    # 2 ranks, a 32 MiB L3: half is 16777216 B; / (2 ranks x 3 arrays x 8 B) = 349525.3 doubles per
    # array = (n + 2)^2, sqrt 591.2 -> n + 2 = 591, n = 589 (2*3*591^2*8 = 16766736 <= 16777216 <
    # 2*3*592^2*8 = 16823808); the grid 589 // 2^k, k = 6..1
    llc = {"level": 3, "size": 32 * 2**20, "instances": 1, "total": 32 * 2**20}
    n, grid, _ = dt.target(2, llc)
    assert n == 589
    assert grid == [9, 18, 36, 73, 147, 294]
    assert 2 * 3 * 591**2 * 8 == dt.working_set(589, 2) <= 16 * 2**20 < dt.working_set(590, 2)
    # 4 ranks over two 16 MiB L3s (32 MiB together): 16 MiB / (4 x 3 x 8 B) = 174762.7 -> 418.05,
    # n = 416; the grid 6..208
    n, grid, _ = dt.target(4, {"level": 3, "size": 16 * 2**20, "instances": 2, "total": 32 * 2**20})
    assert (n, grid) == (416, [6, 13, 26, 52, 104, 208])
    # the old demo design when the cache is unknown
    n, grid, _ = dt.target(2, None)
    assert (n, grid) == (1024, [16, 32, 64, 128, 256, 512])


def test_demo_target_prints_what_demo_sh_reads(monkeypatch, capsys):
    """demo.sh reads four lines: n, the grid for -P n=, the iterations for -i, the reason."""
    dt = _demo_target()
    monkeypatch.setattr(machine, "last_level_cache",
                        lambda: {"level": 3, "size": 2**25, "instances": 1, "total": 2**25})
    assert dt.main(["2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0] == "589"
    assert lines[1] == "9,18,36,73,147,294"
    assert lines[2] == "3000"
    assert dt.main(["0"]) == 2


def test_last_level_of_a_machine_record():
    """The entry the adaptive campaign's caveat names: the highest level holding data."""
    rec = [{"level": 1, "type": "Data", "size": 32768}, {"level": 1, "type": "Instruction", "size": 32768},
           {"level": 2, "type": "Unified", "size": 2**20}, {"level": 3, "type": "Unified", "size": 2**25},
           {"level": 4, "type": "Instruction", "size": 2**30}]
    assert machine.last_level(rec) == {"level": 3, "type": "Unified", "size": 2**25}
    assert machine.last_level([]) is None and machine.last_level(None) is None


def test_demo_iterations_keep_the_old_designs_work_by_hand():
    """1000 sweeps at n = 1024 (the old target): at n = 589, 1000 * (1024/589)^2 = 3022.5 -> 3000
    (589^2 * 3000 = 1.041e9 point updates, 1024^2 * 1000 = 1.049e9); at n = 416, 6059.2 -> 6100;
    never below 1000."""
    dt = _demo_target()
    assert dt.iterations(589) == 3000
    assert dt.iterations(416) == 6100
    assert dt.iterations(1024) == 1000 and dt.iterations(2048) == 1000
