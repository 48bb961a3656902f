"""The worker pool's start-up sentence: what the actors ask for against what was free.

The deadlines themselves need real actors: tests/runtime/test_faults.py (a stuck
actor) and tests/test_cli.py (a head node whose CPUs another client holds).
"""

from gclab.runtime.pool import shortfall


def test_actors_that_do_not_fit_name_what_they_ask_for_and_what_to_change() -> None:
    sentence = shortfall(4, 1, 1.0, 0.0, {"CPU": 1.0}, {"CPU": 2.0}, 10.0)
    assert sentence == (
        "3 of the 4 worker actors did not start within 10 s: they ask for "
        "4 CPUs (cluster.actors=4 x cluster.worker_cpus=1) while the Ray cluster had 1 of its "
        "2 CPUs free; lower cluster.worker_cpus/worker_gpus or cluster.actors, or add nodes."
    )


def test_gpus_are_counted_and_actors_that_fit_were_only_slow() -> None:
    sentence = shortfall(2, 0, 0.5, 1.0, {"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0, "GPU": 1.0}, 5.0)
    assert "for 1 CPU (cluster.actors=2 x cluster.worker_cpus=0.5) while" in sentence
    assert (
        "and 2 GPUs (cluster.actors=2 x cluster.worker_gpus=1) while the Ray cluster had 1 "
        "of its 1 GPU free" in sentence
    )
    assert sentence.endswith("or add nodes.")
    fits = shortfall(2, 1, 0.5, 0.0, {"CPU": 8.0}, {"CPU": 8.0}, 5.0)
    assert fits.endswith(
        "they fit, so they were slow to start (or no single node has room for one): "
        "raise cluster.timeout."
    )
