"""A computation that outlives a rerun, advanced a chunk at a time under a progress bar: the
LN-LSTM page's training and the Shapes page's race.

The job lives in the session state, so a rerun (a click on Stop, any other widget, a visit to
another page) interrupts the run that is drawing it, and the next run finds the job where it was
and goes on with it, unless the learner asked to stop. The page draws between chunks of
:data:`CHUNK_SECONDS`, which is where Streamlit can stop an abandoned run (a closed tab) or start
the one a click asked for. A job is any object with ``done``, ``advance_for(seconds)``,
``stop()``, ``progress()`` (with a ``fraction`` and a ``text``) and ``result()`` (None for one
stopped before it learned anything); the jobs take a lock, so that two runs never advance one
job at once. Each page names its own ``slot`` in the session state (``<slot>_job``,
``<slot>_results``). Finished results are kept per settings' key, the newest last.

Every heavy job of the server (a training, a race, the norm sweep, a broken norm: anything
that runs a model many times) waits its turn in one queue per server process
(:class:`Scheduler`, :func:`scheduler`): at most :attr:`lnviz.limits.Limits.heavy_jobs` run at
once, first come first served, and a waiting learner sees their place in line and how long the
jobs ahead should take (the benchmark, Beyond LayerNorm's substitutions and anything else of
that size go through it too; a one-piece job this server has measured at under
:data:`QUICK_S` runs at once). A job leaves the line when it ends (finished, stopped or
failed); a chunked job whose script run Streamlit ended early keeps its place for the page's
next run to take over. A place nobody has looked at for :data:`TICKET_TTL_S` is given up,
unless its job is running in a thread that is still computing (one piece of work may take
longer than that). While a job runs, its torch threads are bounded
(:func:`bounded_threads`) so that the other learners' pages keep a core.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import streamlit as st

from lnviz.limits import current_limits
from lnviz.ui.cache import cached_through

T = TypeVar("T")

#: Seconds of work between two redraws of the progress bar. Streamlit stops an abandoned run or
#: starts the one a click on Stop asks for only when the script draws, so the page draws this
#: often whatever the settings.
CHUNK_SECONDS = 0.3
#: Finished results kept per slot and session.
RESULTS_KEPT = 4
#: Seconds a place is kept without a run looking at the line (a waiting run looks every
#: WAIT_POLL_S, a running one every CHUNK_SECONDS): long enough for the next script run of a page
#: to take over a job the last one left, short enough that nobody waits long for a closed tab.
TICKET_TTL_S = 8.0
#: Seconds between two looks at the line while waiting.
WAIT_POLL_S = 0.5


class Job(Protocol):
    @property
    def done(self) -> bool: ...

    def advance_for(self, seconds: float) -> int: ...

    def stop(self) -> None: ...

    def progress(self) -> Any: ...

    def result(self) -> Any: ...


def running(slot: str) -> tuple[Hashable, Job] | None:
    """The job under way in ``slot``, with its settings' key, if any."""
    return st.session_state.get(f"{slot}_job")


def stop(slot: str) -> bool:
    """Ask the job in ``slot`` to stop (the run drawing it ends at its next chunk); False if
    nothing is running."""
    job = running(slot)
    if job is not None:
        job[1].stop()
    return job is not None


def start(slot: str, key: Hashable, job: Job) -> None:
    """Make ``job`` (for the settings ``key``) the one running in ``slot``, stopping any other;
    stored before any work, so that a rerun started by a quick click on Stop finds it."""
    stop(slot)
    st.session_state[f"{slot}_job"] = (key, job)


def finished(slot: str, key: Hashable) -> tuple[Any | None, bool]:
    """The finished result for the settings ``key``, or else the newest one in ``slot`` (None
    if there is none), and whether it is the one for ``key``."""
    results = st.session_state.setdefault(f"{slot}_results", {})
    if key in results:
        return results[key], True
    return (list(results.values())[-1] if results else None), False


def run_to_end(slot: str, draw: Callable[[Any], None], what: str) -> Any | None:
    """Drive the job in ``slot`` to its end (finished or stopped), a chunk at a time, under a
    progress bar, calling ``draw(progress)`` after every chunk; then keep its result among the
    finished ones and return it. None if nothing was running, or if the job's result is None (it
    stopped before it learned anything). Once it has ended, or failed, nothing is running in
    ``slot``.

    The job takes its turn in the server's line (:func:`scheduler`): while others run, the bar
    says ``what`` waits, where in line and for about how long; once it runs, its own pace so far
    is its estimate for the learners behind it. A run that Streamlit ends early (a click
    elsewhere on the page starts the next run at once, the learner goes to another page, the tab
    closes) leaves the job and its place as they are: the next run of the page takes both over
    and goes on, and a place nobody takes over is given up (:data:`TICKET_TTL_S`)."""
    job = running(slot)
    if job is None:
        return None
    key, work = job
    bar = st.progress(0.0, text="Preparing the models…")
    line, name = scheduler(), f"{what} ({slot})"
    ticket = line.enter(session_id(), name)
    pace: tuple[float, float] | None = None  # (time, fraction) when this run started working
    try:
        while True:
            now = work.progress()
            if work.done:
                place = 0
            else:
                try:
                    place = line.place(ticket)
                except LookupError:  # an earlier run of the page ended it: take a new place
                    ticket = line.enter(session_id(), name)
                    continue
            if place > 0:  # the bar says so; the figure stays as it is
                bar.progress(now.fraction,
                             text=waiting_text(place, line.wait_s(ticket), what, stop=True))
                time.sleep(WAIT_POLL_S)
                continue
            bar.progress(now.fraction, text=now.text)
            draw(now)
            if work.done:
                break
            pace = pace or (time.monotonic(), now.fraction)
            with bounded_threads():
                work.advance_for(CHUNK_SECONDS)
            fraction = work.progress().fraction
            if fraction > pace[1]:
                ticket.estimate_s = (time.monotonic() - pace[0]) / (fraction - pace[1])
            line.report(ticket, fraction)
    except Exception:  # it failed: it is over (Streamlit's own stops are not Exceptions)
        _over(slot, line, ticket, work)
        raise
    finally:
        bar.empty()
    _over(slot, line, ticket, work)
    result = work.result()
    if result is None:
        return None
    results = st.session_state.setdefault(f"{slot}_results", {})
    results.pop(key, None)
    results[key] = result
    while len(results) > RESULTS_KEPT:
        results.pop(next(iter(results)))
    return result


def _over(slot: str, line: Scheduler, ticket: Ticket, work: Job) -> None:
    """``work`` has ended: it leaves the line and ``slot`` (unless another job took it)."""
    line.leave(ticket)
    job = running(slot)
    if job is not None and job[1] is work:
        st.session_state[f"{slot}_job"] = None


# --- One line for the server's heavy work -------------------------------------------------------

@dataclass(eq=False)
class Ticket:
    """A place in the :class:`Scheduler`'s line.

    Attributes:
        owner: the session that holds it (:func:`session_id`); ``what``: its job, in words.
        estimate_s: how long the job should run once started (None: not known).
        done: the fraction of it done (a chunked job reports it as it goes).
        started: when it started running (None while it waits); ``touched``: when its run last
            drew (see :data:`TICKET_TTL_S`); ``thread``: the script run that holds it.
    """

    owner: str
    what: str
    estimate_s: float | None
    touched: float
    done: float = 0.0
    started: float | None = None
    left: bool = field(default=False, repr=False)
    thread: threading.Thread = field(default_factory=threading.current_thread, repr=False)


class Scheduler:
    """The server's one line for heavy work: tickets in the order they came, of which the first
    ``limit`` may run. Thread-safe: every session's script run calls it."""

    def __init__(self, limit: int, *, ttl_s: float = TICKET_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1:
            raise ValueError("at least one job must be able to run")
        self.limit, self.ttl_s, self.clock = limit, ttl_s, clock
        self._line: list[Ticket] = []
        self._lock = threading.Lock()

    def enter(self, owner: str, what: str, estimate_s: float | None = None, *,
              rejoin: bool = True) -> Ticket:
        """A place for ``owner``'s job ``what``: with ``rejoin``, the one it holds already (a
        job that goes on from one script run to the next keeps its place, and the calling
        thread takes it over), else a new one at the end of the line."""
        with self._lock:
            self._expire()
            for ticket in self._line if rejoin else ():
                if (ticket.owner, ticket.what) == (owner, what):
                    ticket.touched = self.clock()
                    ticket.thread = threading.current_thread()
                    if estimate_s is not None:
                        ticket.estimate_s = estimate_s
                    return ticket
            ticket = Ticket(owner, what, estimate_s, self.clock())
            self._line.append(ticket)
            return ticket

    def place(self, ticket: Ticket) -> int:
        """0 when ``ticket`` may run now (it is among the first ``limit``), else how many
        tickets are ahead of it that must end or leave first. Looking counts as drawing."""
        with self._lock:
            self._expire()
            if ticket not in self._line:
                raise LookupError(f"{ticket.what!r} has left the line")
            ticket.touched = self.clock()
            position = self._line.index(ticket)
            if position < self.limit:
                if ticket.started is None:
                    ticket.started = ticket.touched
                return 0
            return position - self.limit + 1

    def wait_s(self, ticket: Ticket) -> float | None:
        """About how long until ``ticket`` runs: the rest of the jobs ahead, shared out over
        the ``limit`` that run at once. None when a job ahead has no estimate."""
        with self._lock:
            if ticket not in self._line:
                return None
            ahead = self._line[:self._line.index(ticket)]
            rests = [self._rest(t) for t in ahead]
        if any(rest is None for rest in rests):
            return None
        # the jobs ahead start as places free up: the longest of each round of `limit`
        lanes = [0.0] * self.limit
        for rest in rests:
            lanes[lanes.index(min(lanes))] += rest
        return min(lanes)

    def _rest(self, ticket: Ticket) -> float | None:
        if ticket.estimate_s is None:
            return None
        return ticket.estimate_s * (1.0 - min(max(ticket.done, 0.0), 1.0))

    def report(self, ticket: Ticket, done: float) -> None:
        """The running job has done ``done`` (a fraction) of its work."""
        with self._lock:
            ticket.done, ticket.touched = done, self.clock()

    def leave(self, ticket: Ticket) -> None:
        """``ticket`` leaves the line (its job ended, was stopped or abandoned)."""
        with self._lock:
            ticket.left = True
            if ticket in self._line:
                self._line.remove(ticket)

    def waiting(self) -> list[Ticket]:
        """The line as it stands, first first."""
        with self._lock:
            self._expire()
            return list(self._line)

    def _expire(self) -> None:
        now = self.clock()
        for ticket in [t for t in self._line if now - t.touched > self.ttl_s and (
                t.started is None or not t.thread.is_alive())]:
            ticket.left = True
            self._line.remove(ticket)


_scheduler: Scheduler | None = None
_scheduler_lock = threading.Lock()


def scheduler() -> Scheduler:
    """The server process's one :class:`Scheduler`, at :attr:`Limits.heavy_jobs` at once
    (``LNVIZ_HEAVY_JOBS`` sets another number)."""
    global _scheduler
    with _scheduler_lock:
        if _scheduler is None:
            limit = os.environ.get("LNVIZ_HEAVY_JOBS", "").strip()
            _scheduler = Scheduler(int(limit) if limit.isdigit() and int(limit) > 0
                                   else current_limits().heavy_jobs)
        return _scheduler


def session_id() -> str:
    """This learner's session, as the line knows it (kept in the session state)."""
    return st.session_state.setdefault("_lnviz_session", uuid.uuid4().hex)


_threads_lock = threading.Lock()
_threads_before: list[int] = []  # torch's thread count before the first job that runs now
_jobs_inside = [0]


@contextlib.contextmanager
def bounded_threads() -> Iterator[None]:
    """Run the body with at most all cores but one for torch (at least one): a heavy job leaves
    the other learners' pages a core. torch's count is the process's, so the last job to end
    restores what it was before the first began."""
    import torch

    with _threads_lock:
        if _jobs_inside[0] == 0:
            _threads_before[:] = [torch.get_num_threads()]
        _jobs_inside[0] += 1
        torch.set_num_threads(max(1, min(_threads_before[0], (os.cpu_count() or 1) - 1)))
    try:
        yield
    finally:
        with _threads_lock:
            _jobs_inside[0] -= 1
            if _jobs_inside[0] == 0:
                torch.set_num_threads(_threads_before[0])


def waiting_text(place: int, wait_s: float | None, what: str, *, stop: bool = False) -> str:
    """What a learner waiting in line reads; ``stop``: the job has a Stop button."""
    ahead = "1 other learner's job" if place == 1 else f"{place} other learners' jobs"
    when = (f" — about {duration(wait_s)}" if wait_s is not None and wait_s >= 1 else
            " — it starts in a moment" if wait_s is not None else "")
    leave = "Leave the page or press Stop" if stop else "Leave the page"
    return (f"Waiting for the server: {what} starts after {ahead} in line{when}. {leave} to "
            "give up your place.")


def duration(seconds: float) -> str:
    """A time to wait, rounded as a person says it: "42 s", "3 min"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def wait_turn(ticket: Ticket, show: Callable[[str], None], *, stop: bool = False) -> None:
    """Wait until ``ticket`` may run, telling the learner their place with ``show`` (a draw, so
    that Streamlit can end the wait when the tab closes or the learner clicks elsewhere)."""
    line = scheduler()
    while (place := line.place(ticket)) > 0:
        show(waiting_text(place, line.wait_s(ticket), ticket.what, stop=stop))
        time.sleep(WAIT_POLL_S)


#: Seconds per unit of work of each kind of heavy job, as last measured on this server.
_paces: dict[str, float] = {}
#: A one-piece job this server ran faster than this before (at its measured pace) runs at once,
#: beside whatever is running, as a page's rerun does: the line is for work that would hold a
#: core for long, not for a page's first view.
QUICK_S = 1.0


def estimate_s(kind: str, units: float) -> float | None:
    """How long ``units`` of work of ``kind`` should take here, at the pace the last job of that
    kind ran (None before any has run on this server)."""
    pace = _paces.get(kind)
    return None if pace is None else pace * units


@dataclass
class Turn:
    """A turn in the line, as the body of :func:`heavy` sees it: ``measured`` False when the
    body computed nothing (another learner's result was there when the turn came), so that its
    time sets no pace."""

    measured: bool = True


@contextlib.contextmanager
def heavy(what: str, show: Callable[[str], None], *, kind: str, units: float,
          stop: bool = False) -> Iterator[Turn]:
    """Take a turn in the server's line for a one-piece heavy computation of ``units`` of work
    of ``kind`` (the norm sweep: token-runs of the model): wait for it, showing the place with
    ``show`` (``stop``: the page has a Stop button for it); run the body with bounded threads
    and measure its pace for the estimates after it; leave the line however the body ends. A
    job that should take under :data:`QUICK_S` at the measured pace runs at once.

    Every call takes a place of its own: a script run that Streamlit ends while the body
    computes cannot stop it, so that place is held until the body returns, and the page's next
    run waits behind it."""
    about = estimate_s(kind, units)
    quick = about is not None and about < QUICK_S
    line = scheduler()
    ticket = None if quick else line.enter(session_id(), what, about, rejoin=False)
    try:
        if ticket is not None:
            wait_turn(ticket, show, stop=stop)
        started, turn = time.monotonic(), Turn()
        with bounded_threads():
            yield turn
        if units > 0 and turn.measured:
            _paces[kind] = (time.monotonic() - started) / units
    finally:
        if ticket is not None:
            line.leave(ticket)


def heavy_cached(what: str, kind: str, units: float, func: Callable[..., T], *args: Any,
                 for_all: bool = False, **kwargs: Any) -> T:
    """``cached(func, *args, **kwargs)`` where a miss takes its turn in the server's line
    (:func:`heavy`) with a note of its place; a hit is immediate. ``for_all``: the result is
    kept for every session (:func:`lnviz.ui.cache.cached`), only where every input is the
    app's own."""
    def in_line(compute: Callable[[], T]) -> T:
        note = st.empty()
        with heavy(what, lambda text: note.info(text, icon=":material/hourglass_top:"),
                   kind=kind, units=units) as turn:
            value = compute()
            turn.measured = getattr(compute, "computed", True)
        note.empty()
        return value

    return cached_through(in_line, func, *args, for_all=for_all, **kwargs)
