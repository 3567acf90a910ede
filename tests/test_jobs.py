"""lnviz.ui.jobs' line for heavy work: first come first served, at most ``limit`` at once under
concurrent submits, places given up when their session goes, and estimates from measured pace."""

from __future__ import annotations

import threading
import time
import types

import pytest

from lnviz.limits import DEMO_LIMITS, FULL_LIMITS
from lnviz.ui import jobs
from lnviz.ui.jobs import Scheduler, waiting_text


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_first_come_first_served_and_the_first_limit_run():
    line = Scheduler(2, clock=Clock())
    a, b, c, d = (line.enter(f"s{k}", "the sweep") for k in range(4))
    assert [line.place(t) for t in (a, b, c, d)] == [0, 0, 1, 2]
    line.leave(a)
    assert [line.place(t) for t in (b, c, d)] == [0, 0, 1]
    assert line.waiting() == [b, c, d]
    assert c.started is not None and d.started is None


def test_a_learner_entering_again_keeps_their_place():
    line = Scheduler(1, clock=Clock())
    first = line.enter("alice", "your race (sh_race)")
    behind = line.enter("bob", "your race (sh_race)")
    assert line.enter("alice", "your race (sh_race)") is first  # the same job, the same place
    assert line.enter("alice", "your training (tr)") is not first  # another job of hers
    assert line.place(behind) == 1 and line.waiting()[-1].what == "your training (tr)"


def test_a_place_nobody_looks_at_is_given_up_and_the_next_runs():
    clock = Clock()
    line = Scheduler(1, ttl_s=8.0, clock=clock)
    running = line.enter("alice", "the sweep")
    assert line.place(running) == 0
    stuck, bob = line.enter("stuck tab", "the sweep"), line.enter("bob", "the sweep")
    for _ in range(4):  # bob keeps looking every 3 s; the stuck tab's run looks no more
        clock.now += 3.0
        place = line.place(bob)
    # a waiting place unlooked-at for 8 s is given up; a running job whose thread computes keeps
    # its place however long one piece of its work takes
    assert place == 1 and stuck.left and line.waiting() == [running, bob]
    with pytest.raises(LookupError):
        line.place(stuck)


def run_in_thread(target):
    """What ``target()`` returns, called in a thread that has ended (a script run that is over)."""
    out = []
    thread = threading.Thread(target=lambda: out.append(target()))
    thread.start()
    thread.join()
    return out[0]


def test_the_next_run_takes_over_a_place_its_page_left_and_nobody_else_can_keep_it():
    clock = Clock()
    line = Scheduler(1, ttl_s=8.0, clock=clock)
    running = line.enter("alice", "your race (sh_race)")
    line.place(running)
    # bob's waiting run is ended by a click elsewhere on his page; his next run comes 1 s later
    left = run_in_thread(lambda: line.enter("bob", "your race (sh_race)"))
    clock.now += 1.0
    again = line.enter("bob", "your race (sh_race)")
    assert again is left and again.thread is threading.current_thread()
    assert line.place(again) == 1
    # a running job whose run ended (a tab closed mid-chunk) keeps its place 8 s, then not
    closed = Scheduler(1, ttl_s=8.0, clock=clock)
    gone = run_in_thread(lambda: closed.enter("carol", "your training (tr)"))
    gone.started = clock.now
    behind = closed.enter("dave", "your training (tr)")
    clock.now += 5.0
    assert closed.place(behind) == 1
    clock.now += 4.0
    assert closed.place(behind) == 0 and gone.left


def test_one_piece_jobs_take_a_place_each_and_a_quick_one_does_not_wait(monkeypatch):
    line = Scheduler(1)
    monkeypatch.setattr(jobs, "_scheduler", line)
    monkeypatch.setattr(jobs, "_paces", {"runs": 0.01})
    monkeypatch.setattr(jobs, "session_id", lambda: "alice")
    monkeypatch.setattr(jobs, "WAIT_POLL_S", 0.01)
    shown = []
    first = line.enter("alice", "the broken norm's runs", rejoin=False)  # still computing
    with jobs.heavy("the broken norm's runs", shown.append, kind="runs", units=10):  # 0.1 s
        assert line.waiting() == [first] and shown == []  # quick: it ran at once, no place
    jobs._paces["runs"] = 0.01  # 1000 units: 10 s, not quick
    waited = threading.Event()

    def second() -> None:
        with jobs.heavy("the broken norm's runs", shown.append, kind="runs", units=1000):
            waited.set()

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.2)
    assert not waited.is_set()  # the same learner's second job waits behind the first
    assert shown and shown[-1] == (
        "Waiting for the server: the broken norm's runs starts after 1 other learner's job in "
        "line. Leave the page to give up your place.")
    line.leave(first)
    thread.join(timeout=30)
    assert waited.is_set() and line.waiting() == []


def test_the_wait_is_the_rest_of_the_jobs_ahead_shared_over_the_places():
    line = Scheduler(1, clock=Clock())
    running = line.enter("a", "the sweep", estimate_s=60.0)
    second = line.enter("b", "the sweep", estimate_s=30.0)
    me = line.enter("c", "the sweep", estimate_s=10.0)
    line.place(running)
    line.report(running, 0.5)  # half done: 30 s left
    assert line.wait_s(me) == pytest.approx(30.0 + 30.0)
    assert line.wait_s(second) == pytest.approx(30.0)
    two = Scheduler(2, clock=Clock())
    tickets = [two.enter(k, "race", estimate_s=s) for k, s in (("a", 40.0), ("b", 10.0),
                                                                ("c", 10.0))]
    mine = two.enter("d", "race", estimate_s=5.0)
    # a (40) and b (10) run; c starts when b ends (10), and d when c ends (20), before a (40)
    assert two.wait_s(mine) == pytest.approx(20.0)
    assert two.wait_s(tickets[0]) == pytest.approx(0.0)
    unknown = Scheduler(1, clock=Clock())
    unknown.enter("a", "training")  # no estimate yet
    assert unknown.wait_s(unknown.enter("b", "training", estimate_s=3.0)) is None


class Recording(Scheduler):
    """A scheduler that tells the test who has entered its line, in order."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.entered: list[str] = []
        self.changed = threading.Condition()

    def enter(self, owner: str, what: str, estimate_s: float | None = None, *,
              rejoin: bool = True):
        ticket = super().enter(owner, what, estimate_s, rejoin=rejoin)
        with self.changed:
            self.entered.append(what)
            self.changed.notify_all()
        return ticket


@pytest.mark.parametrize("limit", [1, 2])
def test_at_most_limit_run_at_once_under_concurrent_submits(monkeypatch, limit):
    line = Recording(limit)
    monkeypatch.setattr(jobs, "_scheduler", line)
    monkeypatch.setattr(jobs, "WAIT_POLL_S", 0.01)
    monkeypatch.setattr(jobs, "_paces", {})
    monkeypatch.setattr(jobs, "QUICK_S", 0.0)  # however fast the last one was, every one waits
    inside, most, order, finished = [0], [0], [], []
    lock = threading.Lock()

    def learner(k: int) -> None:
        with line.changed:  # learner k comes after learner k - 1 is in line
            line.changed.wait_for(lambda: len(line.entered) >= k, timeout=30)
        with jobs.heavy(f"job {k}", lambda text: None, kind="test", units=1):
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
                order.append(k)
            # stay until the line is as full as it may get (or nobody else is left), whatever
            # the machine's pace: then a scheduler that lets one more in shows it
            deadline = time.monotonic() + 10
            while (inside[0] < limit and len(finished) + inside[0] < 6
                   and time.monotonic() < deadline):
                time.sleep(0.005)
            time.sleep(0.02)
            with lock:
                inside[0] -= 1
                finished.append(k)

    threads = [threading.Thread(target=learner, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert line.entered == [f"job {k}" for k in range(6)]
    assert most[0] == limit, most
    assert sorted(order) == list(range(6)) and line.waiting() == []
    if limit == 1:  # one at a time: exactly in the order they came
        assert order == list(range(6))


def test_a_failed_job_leaves_the_line_and_its_pace_is_not_recorded(monkeypatch):
    monkeypatch.setattr(jobs, "_scheduler", Scheduler(1))
    monkeypatch.setattr(jobs, "_paces", {})
    with pytest.raises(RuntimeError), jobs.heavy("the sweep", print, kind="sweep", units=10):
        raise RuntimeError("out of memory")
    assert jobs.scheduler().waiting() == [] and jobs.estimate_s("sweep", 10) is None
    # the job's clock, moved by hand: a pace per unit, not per job (a pace per job, 0.05 s,
    # passed a bound on the real clock loose enough for a busy machine)
    clock = Clock()
    monkeypatch.setattr(jobs, "time", types.SimpleNamespace(monotonic=clock, sleep=time.sleep))
    with jobs.heavy("the sweep", print, kind="sweep", units=10):
        clock.now += 0.05
    assert jobs.estimate_s("sweep", 1) == pytest.approx(0.005)  # 0.05 s over 10 units
    assert jobs.estimate_s("sweep", 100) == pytest.approx(0.5)


def test_a_turn_that_computed_nothing_sets_no_pace(monkeypatch):
    """A learner whose turn comes when another learner's result is already there
    (lnviz.ui.cache, for_all) computed nothing: its near-zero time must not make the next jobs
    of its kind look quick and skip the line."""
    monkeypatch.setattr(jobs, "_scheduler", Scheduler(1))
    monkeypatch.setattr(jobs, "_paces", {"runs": 0.01})
    with jobs.heavy("the runs", print, kind="runs", units=1000) as turn:
        turn.measured = False  # what heavy_cached says when the result was there
    assert jobs.estimate_s("runs", 1000) == pytest.approx(10.0)
    with jobs.heavy("the runs", print, kind="runs", units=1000):
        pass  # computed, and quickly
    assert jobs.estimate_s("runs", 1000) < 1.0


def test_the_waiting_learner_reads_their_place_and_the_wait():
    assert waiting_text(1, 42.4, "the norm sweep") == (
        "Waiting for the server: the norm sweep starts after 1 other learner's job in line — "
        "about 42 s. Leave the page to give up your place.")
    assert "after 3 other learners' jobs in line — about 3 min. Leave the page or press Stop" in (
        waiting_text(3, 170, "your race", stop=True))
    assert waiting_text(2, None, "your race").endswith("in line. Leave the page to give up "
                                                       "your place.")


def test_the_demo_runs_one_heavy_job_at_a_time_and_the_setting_overrides(monkeypatch):
    assert DEMO_LIMITS.heavy_jobs == 1 and FULL_LIMITS.heavy_jobs == 2
    monkeypatch.delenv("LNVIZ_HEAVY_JOBS", raising=False)  # tests/conftest.py sets it
    monkeypatch.setattr(jobs, "_scheduler", None)
    monkeypatch.setenv("LNVIZ_DEMO", "")
    assert jobs.scheduler().limit == 2
    monkeypatch.setattr(jobs, "_scheduler", None)
    monkeypatch.setenv("LNVIZ_DEMO", "1")
    assert jobs.scheduler().limit == 1
    monkeypatch.setattr(jobs, "_scheduler", None)
    monkeypatch.setenv("LNVIZ_HEAVY_JOBS", "3")
    assert jobs.scheduler().limit == 3
    monkeypatch.setattr(jobs, "_scheduler", None)


def test_a_job_runs_with_a_core_left_for_the_other_pages(monkeypatch):
    import torch

    monkeypatch.setattr(jobs.os, "cpu_count", lambda: 4)
    before = torch.get_num_threads()
    with jobs.bounded_threads():
        inside = torch.get_num_threads()
    assert inside == max(1, min(before, 3)) and torch.get_num_threads() == before
