"""EpochPace, the Step lines' AvgTime, on chunks timed by hand (the training loop drives it
on a simulated cluster in test_training_loop.py, and on real processes in
test_step_line_times.py)."""

from __future__ import annotations

import pytest

from trainer.training.pace import EpochPace


def test_without_a_coordinator_each_chunk_is_done_when_run_returns():
    pace = EpochPace(start=10.0)
    for i in range(3):  # 20 batches in 0.2 s each
        pace.started(20, 10.0 + 0.2 * i)
        pace.seen_through(i + 1, 10.0 + 0.2 * (i + 1))
    assert pace.avg_ms(10.6) == pytest.approx(10.0)


def test_a_running_chunk_counts_what_it_had_time_for_at_most_half():
    # Two workers take two chunks of 20 batches at once; 10 ms a batch on each. When the
    # first is seen done, the second has had 20 batches' time: it counts 10, so 0.2 s over
    # 30 batches (the truth: 40 batches, 5 ms each).
    pace = EpochPace(start=0.0)
    pace.started(20, 0.0)
    pace.started(20, 0.0)
    pace.seen_through(1, 0.2)
    assert pace.avg_ms(0.2) == pytest.approx(200 / 30)
    # The second seen done and a third just started: 40 batches, exactly.
    pace.started(20, 0.2)
    pace.seen_through(2, 0.2)
    assert pace.avg_ms(0.2) == pytest.approx(5.0)
    # 50 ms later the third has had 5 batches' time (at the second's pace: 0.2 s for 20).
    assert pace.avg_ms(0.25) == pytest.approx(250 / 45)


def test_a_chunk_that_waited_for_a_worker_counts_at_most_half():
    # One worker: the second chunk, started at 0, has waited for the first, seen done at
    # 0.2 s; it counts half (10 batches): 2/3 of the true 10 ms a batch, the bound.
    pace = EpochPace(start=0.0)
    pace.started(20, 0.0)
    pace.started(20, 0.0)
    pace.seen_through(1, 0.2)
    assert pace.avg_ms(0.2) == pytest.approx(200 / 30)


def test_the_pace_is_the_last_seen_chunks_per_batch():
    # The last chunk seen done: 5 batches in 0.1 s (20 ms each); a running chunk of 20
    # batches started 0.1 s before counts 5 (0.1 s at 20 ms), not the 10 that "as long as
    # the last chunk took" would give.
    pace = EpochPace(start=0.0)
    pace.started(20, 0.0)
    pace.started(5, 0.1)
    pace.started(20, 0.2)
    pace.seen_through(2, 0.2)
    assert pace.avg_ms(0.3) == pytest.approx(300 / (25 + 5))
    # Seen done again later: the earlier time stands.
    pace.seen_through(1, 5.0)
    assert pace.chunks[0].seen == 0.2 and pace.seen_count == 2


def test_no_chunk_seen_done_is_an_error():
    pace = EpochPace(start=0.0)
    pace.started(20, 0.0)
    with pytest.raises(ValueError, match=r"no chunk seen done at 1.000 s into the epoch"):
        pace.avg_ms(1.0)
