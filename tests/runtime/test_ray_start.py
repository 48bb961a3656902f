"""Starting and stopping a private local Ray (gclab/runtime/ray_start.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# A fresh process: the test run's own Ray session (conftest) is not this module's to stop.
SCRIPT = textwrap.dedent(
    """
    import atexit

    import ray
    from ray._private import worker

    from gclab.runtime import ray_start

    registered = []
    atexit.register = lambda func, *args, **kwargs: registered.append(func)
    ray_start.start_or_join(None, num_cpus=1)
    monitor = worker._global_node.all_processes["monitor"][0].process
    assert monitor.poll() is None, "the monitor runs while Ray does"
    assert registered.count(ray_start.stop_monitor) == 1, "left for the exit"
    ray_start.stop_monitor()
    assert monitor.poll() is not None, "the monitor is stopped at exit"
    assert "monitor" not in worker._global_node.all_processes
    assert ray.is_initialized(), "the rest of Ray is Ray's own shutdown's to stop"
    print("checked")
    """
)


@pytest.mark.slow
def test_a_private_ray_stops_its_monitor_first_at_exit() -> None:
    """Ray's shutdown stops the GCS, then waits a second for a monitor that reports its
    end to it; gclab kills the monitor of a Ray it started before that shutdown runs."""
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "checked"
