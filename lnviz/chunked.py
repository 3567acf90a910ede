"""A computation advanced a piece at a time for about a given time, and stoppable between pieces:
what the LN-LSTM comparison (:class:`lnviz.train.Training`) and the Shapes page's race
(:class:`lnviz.train.Race`) share, and what :mod:`lnviz.ui.jobs` drives.

Time rather than a number of steps sizes a chunk, so that the app hands control back to
Streamlit (which stops an abandoned run, or starts the one a click asked for, only there) every
``seconds`` plus at most one piece, however large the settings. The app keeps a computation
between reruns, and Streamlit starts a rerun (a click on Stop) while the previous run is still
inside :meth:`Chunked.advance_for`, so the advances take a lock: one waits for the other's chunk
to end instead of both changing the same weights at once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

__all__ = ["Chunked"]


class Chunked:
    """The machine: ``advance_for(seconds)`` does pieces (:meth:`_work`) for about that long,
    at least one, until the computation is :attr:`done`; ``stop()`` ends it at the end of the
    piece under way; ``seconds`` counts the time spent working. A subclass says what one piece
    is (:meth:`_work`) and when it has finished (:meth:`_finished`)."""

    def __init__(self) -> None:
        self.stopped = False
        self.seconds = 0.0
        self._lock = threading.RLock()

    def _work(self) -> None:
        """One piece of work: a training step, a slice of an evaluation."""
        raise NotImplementedError

    def _finished(self) -> bool:
        """Whether every piece is done."""
        raise NotImplementedError

    def _working(self) -> AbstractContextManager[None]:
        """The context the pieces run in (e.g. torch on one thread)."""
        return contextlib.nullcontext()

    @property
    def done(self) -> bool:
        """Whether it has finished or was stopped."""
        return self.stopped or self._finished()

    def advance_for(self, seconds: float, *, clock: Callable[[], float] = time.perf_counter
                    ) -> int:
        """Work for about ``seconds``: piece after piece until the time is up (after at least
        one piece), it is done or it is stopped. Returns the number of pieces done."""
        with self._lock, self._working():
            start, pieces = clock(), 0
            while not self.done:
                self._work()
                pieces += 1
                if clock() - start >= seconds:
                    break
            self.seconds += clock() - start
            return pieces

    def stop(self) -> None:
        """End where it is, at the end of the piece under way; what was done so far is kept."""
        self.stopped = True
