"""Keep the machine's cores busy, to check that the tests hold on a loaded machine.

    python tools/spin.py --seconds 1200 &      # one busy process per core, for 20 minutes
    python -m pytest                           # meanwhile

Each process counts in a tight loop at normal priority until the time is up (or it is killed),
so the test run shares every core with it, as on a CI machine running other jobs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time


def _spin(until: float) -> None:
    count = 0
    while time.monotonic() < until:
        for _ in range(100_000):
            count += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=900.0, help="how long (default 900)")
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 2,
                        help="busy processes (default: one per core)")
    args = parser.parse_args()
    until = time.monotonic() + args.seconds
    workers = [multiprocessing.Process(target=_spin, args=(until,), daemon=True)
               for _ in range(args.procs)]
    for worker in workers:
        worker.start()
    print(f"spinning {args.procs} processes for {args.seconds:.0f} s", flush=True)
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    main()
