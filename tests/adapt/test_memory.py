"""Memories: per-round costs revised while in the window, and which memory to trust."""

from __future__ import annotations

import numpy as np

from gclab.adapt.memory import Memories

CHEAP, DEAR = "cheap", "dear"  # a low-load and a high-load setting


def decide(memories: Memories, cheap: float, dear: float) -> tuple[int, str]:
    """One round at these costs, then a decision: (trusted length, its pick)."""
    memories.add_round()
    columns = np.array([memories.column(CHEAP, 0.1), memories.column(DEAR, 0.5)])
    memories.revise(columns, np.array([[cheap, dear]]))
    picks = memories.picks(memories.scores(), columns, slack=0.0)
    trusted = memories.trusted()
    names = {column: name for name, column in memories.columns.items()}
    return memories.lengths[trusted], names[picks[trusted]]


def test_after_a_change_the_short_memory_is_trusted_and_picks_the_new_best() -> None:
    memories = Memories([2, 8], judge=4.0)
    for _ in range(8):
        assert decide(memories, cheap=1.0, dear=2.0) == (8, CHEAP)  # equals: the longest
    assert decide(memories, cheap=5.0, dear=2.0) == (8, CHEAP)  # one round: no pick was wrong yet
    # the long memory's pick held for that round and cost 5 where the short one's cost 2
    assert decide(memories, cheap=5.0, dear=2.0) == (2, DEAR)
    assert all(decide(memories, cheap=5.0, dear=2.0)[1] == DEAR for _ in range(10))


def test_a_shorter_memory_takes_trust_only_beyond_the_margin() -> None:
    """The short memory's picks cost 1 % less than the long one's: within a 2 % margin
    the longest stays trusted, with none the short one takes over."""
    memories = Memories([2, 8], judge=4.0)
    memories.add_round()
    columns = np.array([memories.column(CHEAP, 0.1), memories.column(DEAR, 0.5)])
    memories.chosen[-1] = columns[[1, 0]]  # the short memory had picked DEAR, the long CHEAP
    memories.revise(columns, np.array([[1.01, 1.0]]))
    assert memories.lengths[memories.trusted(margin=0.02)] == 8
    assert memories.lengths[memories.trusted()] == 2


def test_a_long_memory_keeps_what_a_short_one_forgets() -> None:
    """The dear setting saves 20 s every sixth round: only a memory that reaches back to
    the last such round keeps it, and its picks are charged least."""
    memories = Memories([2, 12], judge=20.0)
    picks = []
    for r in range(48):
        tail = r % 6 == 5
        picks.append(decide(memories, cheap=21.0 if tail else 1.0, dear=1.5))
    assert all(pick == (12, DEAR) for pick in picks[24:])


def test_a_round_is_revised_while_in_the_window_and_kept_after() -> None:
    memories = Memories([3], judge=4.0)
    for _ in range(3):
        memories.add_round()
    columns = np.array([memories.column(CHEAP, 0.1)])
    memories.revise(columns, np.array([[1.0], [2.0]]))  # the last two rounds
    memories.revise(columns, np.array([[4.0]]))  # the last one, revised
    assert memories.costs[:, 0].tolist() == [0.0, 1.0, 4.0]  # the first: never told
    memories.add_round()  # the oldest leaves: three rounds are kept
    assert memories.costs[:, 0].tolist() == [1.0, 4.0, 0.0]


def test_a_new_setting_starts_with_no_cost_and_picks_stay_among_the_live_ones() -> None:
    memories = Memories([4], judge=4.0)
    memories.add_round()
    cheap = memories.column(CHEAP, 0.1)
    memories.revise(np.array([cheap]), np.array([[3.0]]))
    dear = memories.column(DEAR, 0.5)  # never searched: 0 so far, but not live
    assert memories.costs[:, dear].tolist() == [0.0]
    picks = memories.picks(memories.scores(), np.array([cheap]), slack=0.0)
    assert picks.tolist() == [cheap]


def test_slack_takes_the_most_redundant_setting_near_the_fastest() -> None:
    memories = Memories([1], judge=4.0)
    memories.add_round()
    columns = np.array([memories.column(CHEAP, 0.1), memories.column(DEAR, 0.5)])
    memories.revise(columns, np.array([[1.0, 1.01]]))
    assert memories.picks(memories.scores(), columns, slack=0.02).tolist() == [columns[1]]
    assert memories.picks(memories.scores(), columns, slack=0.0).tolist() == [columns[0]]


def test_the_state_round_trips() -> None:
    memories = Memories([2, 4], judge=3.0)
    for cost in (1.0, 3.0, 2.0):
        decide(memories, cheap=cost, dear=2.0)
    again = Memories([2, 4], judge=3.0)
    again.load_state_dict(memories.state_dict())
    assert decide(again, 5.0, 2.0) == decide(memories, 5.0, 2.0)
    np.testing.assert_array_equal(again.costs, memories.costs)
    np.testing.assert_array_equal(again.chosen, memories.chosen)
