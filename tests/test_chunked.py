"""lnviz.chunked: the stoppable machine the LN-LSTM training and the Shapes race share."""

from __future__ import annotations

import itertools

from lnviz.chunked import Chunked
from lnviz.train import Race, Training


class Count(Chunked):
    """Ten pieces of work, each one tick of a fake clock."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces = 0

    def _work(self) -> None:
        self.pieces += 1

    def _finished(self) -> bool:
        return self.pieces >= 10


def clock(step: float = 0.1):
    ticks = itertools.count()
    return lambda: next(ticks) * step


def test_a_chunk_is_its_time_and_at_least_one_piece_until_done() -> None:
    job = Count()
    assert job.advance_for(0.25, clock=clock()) == 3  # 0.1, 0.2, 0.3 ≥ 0.25: three pieces
    assert job.advance_for(0.0, clock=clock()) == 1  # a chunk does at least one piece
    assert job.advance_for(100.0, clock=clock()) == 6 and job.done  # then stops at the end
    assert job.advance_for(100.0, clock=clock()) == 0 and job.pieces == 10
    assert job.seconds > 0


def test_stop_ends_it_between_pieces_and_keeps_what_was_done() -> None:
    job = Count()
    job.advance_for(0.15, clock=clock())
    job.stop()
    assert job.done and job.advance_for(100.0, clock=clock()) == 0 and job.pieces == 2


def test_the_training_and_the_race_are_the_same_machine() -> None:
    assert issubclass(Training, Chunked) and issubclass(Race, Chunked)
    for kind in (Training, Race):
        assert "advance_for" not in vars(kind) and "stop" not in vars(kind)
