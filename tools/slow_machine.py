"""Run a command as if on a slower machine of this kind: its processes, and every process they
start, share at most ``--cpus`` cores' worth of CPU time (a Linux control group's CPU quota).

    python tools/slow_machine.py --cpus 1 -- python -m pytest

Machines of this project's kind (two cores) differ in speed by two times or more, and the suite
must stay within 10 minutes on the slowest (docs/benchmarks.md §7). The suite is bound by CPU,
so its time on a machine that does half the work a second is about its time here under a quota
of one core: this shows how long it would take there and whether it still passes (its browser
tests wait on one generous timeout, not on this machine's pace). A quota is not a slower core:
the processes run at full speed and are held back in each period of 100 ms once the group has
used its share, so a latency within one period is not slowed.

Needs root and the ``cpu`` controller: cgroup v1's ``cpu`` hierarchy where it is mounted, else
cgroup v2's (``cpu.max``). Prints the command's time and exits with its exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Quota", "quota_for"]

#: The period the quota is counted in (µs): the kernel's default.
PERIOD_US = 100_000
ROOT = Path("/sys/fs/cgroup")


class Quota:
    """A control group of its own under ``root`` (a cgroup file system's mount) whose
    processes share at most ``cpus`` cores of CPU time; :meth:`join` moves the calling process
    into it (its children follow), :meth:`remove` deletes the group once it is empty."""

    def __init__(self, cpus: float, root: Path = ROOT, name: str | None = None) -> None:
        if not cpus > 0:
            raise ValueError(f"--cpus must be more than 0, not {cpus}")
        self.quota_us = quota_for(cpus)
        name = name or f"lnviz-slow-{os.getpid()}"
        if (root / "cpu" / "cpu.cfs_quota_us").exists():  # cgroup v1
            self.group = root / "cpu" / name
            self.group.mkdir()
            (self.group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (self.group / "cpu.cfs_quota_us").write_text(f"{self.quota_us}\n")
            self.members = self.group / "tasks"
        elif "cpu" in _words(root / "cgroup.controllers"):  # cgroup v2
            if "cpu" not in _words(root / "cgroup.subtree_control"):
                (root / "cgroup.subtree_control").write_text("+cpu\n")
            self.group = root / name
            self.group.mkdir()
            (self.group / "cpu.max").write_text(f"{self.quota_us} {PERIOD_US}\n")
            self.members = self.group / "cgroup.procs"
        else:
            raise RuntimeError(f"no cgroup cpu controller under {root}: cannot set a CPU quota")

    def join(self) -> None:
        self.members.write_text(f"{os.getpid()}\n")

    def remove(self) -> None:
        with contextlib.suppress(OSError):  # a process of the command outlived it: the
            self.group.rmdir()  # group stays


def quota_for(cpus: float) -> int:
    """The quota (µs of CPU time a :data:`PERIOD_US` period) for ``cpus`` cores."""
    return max(1000, round(cpus * PERIOD_US))


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", type=float, default=1.0,
                        help="cores' worth of CPU time the command may use (default 1: a "
                             "machine of two cores that does half this one's work a second)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the command, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    try:
        quota = Quota(args.cpus)
    except (OSError, RuntimeError, ValueError) as err:
        print(f"slow_machine: {err}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        status = subprocess.call(command, preexec_fn=quota.join)
    finally:
        quota.remove()
    print(f"slow_machine: {' '.join(command)} took {time.monotonic() - started:.0f} s "
          f"under {args.cpus:g} core(s) of CPU time (exit status {status})", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
