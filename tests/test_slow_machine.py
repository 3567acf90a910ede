"""tools/slow_machine.py without root: the control group it writes, in a cgroup file system
made of plain files (the tool's run under a real quota is docs/benchmarks.md §7's)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.slow_machine import PERIOD_US, Quota, main, quota_for


def _v1(root: Path) -> Path:
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    return root


def _v2(root: Path, enabled: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text(enabled)
    return root


@pytest.mark.parametrize(("cpus", "quota"), [(1, 100_000), (0.75, 75_000), (2, 200_000),
                                             (0.001, 1000), (1.2345, 123_450)])
def test_the_quota_is_the_cores_share_of_each_period(cpus, quota):
    assert PERIOD_US == 100_000
    assert quota_for(cpus) == quota


def test_cgroup_v1_gets_a_group_with_the_period_and_quota(tmp_path):
    quota = Quota(0.75, root=_v1(tmp_path), name="g")
    group = tmp_path / "cpu" / "g"
    assert (group / "cpu.cfs_period_us").read_text() == "100000\n"
    assert (group / "cpu.cfs_quota_us").read_text() == "75000\n"
    quota.join()
    assert (group / "tasks").read_text() == f"{os.getpid()}\n"
    (group / "tasks").unlink()  # the kernel's files vanish with the group; these are plain
    for name in ("cpu.cfs_period_us", "cpu.cfs_quota_us"):
        (group / name).unlink()
    quota.remove()
    assert not group.exists()


def test_cgroup_v2_enables_the_cpu_controller_and_writes_cpu_max(tmp_path):
    root = _v2(tmp_path)
    quota = Quota(1, root=root, name="g")
    assert (root / "cgroup.subtree_control").read_text() == "+cpu\n"
    assert (root / "g" / "cpu.max").read_text() == "100000 100000\n"
    quota.join()
    assert (root / "g" / "cgroup.procs").read_text() == f"{os.getpid()}\n"


def test_cgroup_v2_with_the_controller_enabled_leaves_it(tmp_path):
    root = _v2(tmp_path, enabled="cpu memory\n")
    Quota(2, root=root, name="g")
    assert (root / "cgroup.subtree_control").read_text() == "cpu memory\n"
    assert (root / "g" / "cpu.max").read_text() == "200000 100000\n"


def test_a_group_left_with_a_process_in_it_is_kept(tmp_path):
    quota = Quota(1, root=_v1(tmp_path), name="g")
    quota.remove()  # not empty: its files are still there
    assert (tmp_path / "cpu" / "g" / "cpu.cfs_quota_us").exists()


@pytest.mark.parametrize("cpus", [0, -1, float("nan")])
def test_no_share_of_nothing(tmp_path, cpus):
    with pytest.raises(ValueError, match="more than 0"):
        Quota(cpus, root=_v1(tmp_path))


def test_without_a_cpu_controller_it_says_so(tmp_path, capsys):
    with pytest.raises(RuntimeError, match="no cgroup cpu controller"):
        Quota(1, root=tmp_path)
    assert main(["--cpus", "0", "--", "true"]) == 2
    assert "more than 0" in capsys.readouterr().err


def test_the_command_is_required():
    with pytest.raises(SystemExit):
        main(["--cpus", "1"])
