"""``cluster=netns``: a private Ray cluster whose nodes live in a network box on this machine.

The box (:mod:`gclab.runtime.netbox`) has a head namespace and ``cluster.nodes`` node
namespaces, each node behind its own link of ``cluster.link.bandwidth`` bytes/s each way
that loses ``cluster.link.loss`` of the IP packets crossing it (``cluster.node_links``
overrides them node by node). Ray runs inside: a head (``ray start --head``, no CPUs, so
no worker lands on it) in the head namespace and one raylet per node joining it over the
bridge, each started with ``ray start`` inside its namespace. The driver (the parameter
server) joins from the head namespace: its main thread enters it before Ray connects, so
the threads Ray starts live there too. Every gradient, every broadcast of the weights
and the data shards at start-up then cross a shaped, lossy link over TCP, as Ray sends
them; the wall clock (``network.clock=wall``, which the box requires) measures what that
costs.

Actor ``i`` runs on node ``1 + i mod cluster.nodes`` (its bundle asks for a sliver of that
node's Ray resource ``node:<address>``; each node offers the CPUs its share of the actors
reserves). With one actor per worker, the wall clock's default, worker ``w`` runs on node
``1 + w mod cluster.nodes``: the layout ``delay=tcp_loss delay.nodes`` assumes on the
virtual clock, where a node's workers share its link and its copy of the weights.
``summary.json`` records ``worker_nodes`` (the node of each logical worker), the links,
the MTU, TCP's congestion control and ``link_traffic``: the bytes and IP packets each
link carried each way during the rounds, and how many it lost.

:meth:`NetnsCluster.running` builds all of it and takes it down again, Ray processes
included, however the run ends (a Ctrl-C, a failure, a lost cluster): nothing is left.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ray

from gclab.coding import params
from gclab.errors import ConfigError, under
from gclab.rundir.interrupts import ClusterLost
from gclab.runtime import netbox
from gclab.runtime.cluster import Cluster
from gclab.runtime.netbox import Box, Link
from gclab.runtime.ray_start import start_or_join

#: The head's GCS port (the box's namespaces have ports of their own).
GCS_PORT = 6379
#: The link every node has unless ``cluster.node_links`` says otherwise: 100 Mbit/s, no loss.
DEFAULT_LINK = Link(bandwidth=1.25e7, loss=0.0)
#: How much of a node's ``node:<address>`` resource (1 in all) an actor's bundle asks for.
PIN = 0.001
#: Ray's smallest object store, bytes.
MIN_OBJECT_STORE = 75e6
#: Ray's token authentication, on in every node and the driver: one secret per process
#: (Ray's core caches the token it reads first).
AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
#: The head hands its system config to every node. Ray's worker processes run at the
#: driver's priority (Ray's default, 15, is the background's: on a busy machine the wall
#: clock would measure the others' work). A node asks again for an object it has not
#: received within Ray's ``object_manager_pull_timeout_ms`` (10 s), and the holder sends
#: it again: on a slow link a round's packets take longer than that (4 ResNet-18 packets
#: through 12.5 MB/s: 14 s), and the box carried each round's bytes half again. The box
#: waits 10 minutes, so that what it measures is TCP, not Ray's duplicates.
SETTINGS = '--system-config={"worker_niceness": 0, "object_manager_pull_timeout_ms": 600000}'
#: Seconds the box's Ray nodes may take to come up, at least (``cluster.timeout`` if
#: longer): each ``ray start`` imports Ray and starts its processes, which on a 2-core
#: machine running other jobs took up to two minutes per node.
STARTUP = 300.0
#: What ``ray start`` says when its raylet did not register within Ray's 30 s.
RAYLET_SLOW = "The current node timed out during startup"
#: Runs ``ray start`` with this interpreter (so a node imports the driver's gclab).
RAY_CLI = "import sys; from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"


class NetnsCluster(Cluster):
    """Ray nodes in network namespaces over shaped, lossy links (see the module docstring).

    ``nodes``: the worker nodes. ``link``: every node's link (``bandwidth`` bytes/s each
    way, ``loss`` the IP packet loss probability each way); ``node_links``: per-node
    overrides, in node order, whose ``null`` values keep ``link``'s. ``mtu``: the links'
    IP packet size, bytes (9000: jumbo frames, as in AWS's VPCs; at 1500 this machine's
    CPUs cannot fill a 125 MB/s link). ``object_store``: bytes of each node's Ray
    object store (2 GB: at 500 MB, pipelined_fr's ResNet-18 packets of the jobs in
    flight overflowed it, and the box carried up to 26 % more bytes than the packets
    hold). The other keys are :class:`~gclab.runtime.cluster.Cluster`'s.
    """

    def __init__(
        self,
        nodes: int = 2,
        link: Link = DEFAULT_LINK,
        node_links: Sequence[Link] | None = None,
        mtu: int = 9000,
        object_store: float = 2e9,
        **cluster: Any,
    ) -> None:
        gpus = cluster.get("worker_gpus", 0.0)
        if gpus:  # before Cluster's own checks, which look for a GPU
            raise ConfigError(
                f"worker_gpus={gpus!r} is invalid with cluster=netns: the box's nodes offer "
                "CPUs only; use 0.",
                param="worker_gpus",
            )
        super().__init__(**cluster)
        self.nodes = params.count("nodes", nodes)
        if self.nodes > self.workers:
            raise ConfigError(
                f"nodes={nodes} is invalid: with workers={self.workers} a node would have "
                "no worker; use at most as many nodes as workers.",
                param="nodes",
                also=("workers",),
            )
        with under("link"):
            self.link = _link(link).check()
        overrides = list(node_links or [])
        if len(overrides) > self.nodes:
            raise ConfigError(
                f"node_links has {len(overrides)} entries but nodes={self.nodes}; give at "
                "most one per node (null values keep cluster.link's).",
                param="node_links",
                also=("nodes",),
            )
        #: Each node's link, ``cluster.link`` with the node's override applied.
        self.links = []
        for i in range(self.nodes):
            with under(f"node_links[{i}]"):
                override = _link(overrides[i]) if i < len(overrides) else Link()
                self.links.append(override.over(self.link).check())
        if isinstance(mtu, bool) or not isinstance(mtu, int) or not 1280 <= mtu <= 65535:
            raise ConfigError(
                f"mtu={mtu!r} is invalid: it must be an integer number of bytes in "
                "1280..65535 (1500: Ethernet, 9000: jumbo frames).",
                param="mtu",
            )
        self.mtu = mtu
        if not (isinstance(object_store, (int, float)) and object_store >= MIN_OBJECT_STORE):
            raise ConfigError(
                f"object_store={object_store!r} is invalid: Ray needs at least "
                f"{MIN_OBJECT_STORE:.0e} bytes per node.",
                param="object_store",
            )
        self.object_store = int(object_store)
        if self.address is not None:
            raise ConfigError(
                f"address={self.address!r} is invalid with cluster=netns, which starts its "
                "own Ray inside the box; leave it null.",
                param="address",
            )
        netbox.check_host()
        self._box: Box | None = None
        self._traffic: list[dict[str, int]] = []

    def check(self, network: Any) -> None:
        """The box's network is real: refuse the virtual clock and modelled bandwidths."""
        if network.clock != "wall":
            raise ConfigError(
                f"network.clock={network.clock} does not measure the box: cluster=netns "
                "needs network.clock=wall, where the links' real time is the clock."
            )
        for key in ("bandwidth", "broadcast_bandwidth"):
            if getattr(network, key) is not None:
                raise ConfigError(
                    f"network.{key}={getattr(network, key)!r} would charge the bytes a second "
                    "time: cluster=netns sends them over real links (cluster.link.bandwidth); "
                    f"leave network.{key} null."
                )

    def node_cpus(self) -> int:
        """CPUs each node offers Ray: what its share of the actors reserves (at least 1)."""
        actors = self.actors or self.workers  # the wall clock's default: one per worker
        return max(1, math.ceil(math.ceil(actors / self.nodes) * self.worker_cpus))

    def pins(self, actors: int) -> list[dict[str, float]]:
        """Actor ``i`` on node ``1 + i mod nodes``, by a sliver of the node's own Ray
        resource."""
        assert self._box is not None
        box = self._box
        return [{f"node:{box.address(1 + i % self.nodes)}": PIN} for i in range(actors)]

    @contextmanager
    def running(self) -> Iterator[Box]:
        """Build the box, start Ray in it and connect the driver from its head; on the way
        out disconnect, end every Ray process and remove the box."""
        if ray.is_initialized():
            raise RuntimeError("cluster=netns needs a process that is not connected to Ray yet.")
        temp = Path(tempfile.mkdtemp(prefix="gclab-box-", dir="/tmp"))
        lost = False
        before = {key: os.environ.get(key) for key in AUTH}
        _authenticate(AUTH)  # the driver's, as the nodes' (their environment is ours)
        try:
            with Box(self.links, self.mtu) as box, netbox.inside(box.head):
                try:
                    self._start(box, temp)
                    self._box = box
                    yield box
                except ClusterLost:
                    lost = True  # Ray's shutdown would wait for the lost GCS
                    raise
                finally:
                    self._box = None
                    if ray.is_initialized() and not lost:
                        ray.shutdown()
        finally:
            shutil.rmtree(temp, ignore_errors=True)
            _authenticate(before)

    def _start(self, box: Box, temp: Path) -> None:
        """Start the Ray head and the nodes, connect the driver, wait for every node."""
        deadline = time.monotonic() + max(self.timeout, STARTUP)
        head = ["--head", f"--port={GCS_PORT}", "--num-cpus=0", "--include-dashboard=false"]
        _up(box, temp, {0: [*head, SETTINGS]}, self.object_store, deadline)
        address = f"{box.address(0)}:{GCS_PORT}"
        node = [f"--address={address}", f"--num-cpus={self.node_cpus()}"]
        # the nodes together, once the head is up (a node needs the head's record in the GCS)
        _up(box, temp, {k: node for k in range(1, self.nodes + 1)}, self.object_store, deadline)
        start_or_join(address, node_ip=box.address(0))
        while sum(n["Alive"] for n in ray.nodes()) < self.nodes + 1:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the box's Ray nodes did not all join the head in time: {ray.nodes()}"
                )
            time.sleep(0.2)

    def _start_or_join(self) -> None:
        if self._box is None:
            raise RuntimeError("cluster=netns connects inside NetnsCluster.running() only.")

    def layout(self, nodes: Sequence[str], groups: Sequence[Sequence[int]]) -> dict[str, Any]:
        """The box's part of summary.json: each logical worker's node (1, 2, ...), the
        links, MTU and congestion control; starts counting the links' traffic."""
        assert self._box is not None
        where = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        index = {self._box.address(k): k for k in range(1, self.nodes + 1)}
        worker_nodes = [0] * self.workers
        for node, group in zip(nodes, groups):
            for w in group:
                worker_nodes[w] = index.get(where.get(node, ""), 0)
        self._traffic = self._box.traffic()
        return {
            "worker_nodes": worker_nodes,
            "links": [{"bandwidth": link.bandwidth, "loss": link.loss} for link in self.links],
            "mtu": self.mtu,
            "tcp": netbox.congestion(),
        }

    def traffic(self) -> dict[str, Any]:
        """``link_traffic``: per node, what its link carried since :meth:`layout`."""
        assert self._box is not None
        now = self._box.traffic()
        return {"link_traffic": [_minus(a, b) for a, b in zip(now, self._traffic)]}


def _authenticate(env: Mapping[str, str | None]) -> None:
    """Set Ray's authentication variables (``None``: unset) for this process and the
    processes it starts, and make Ray's core read them again (it reads them once, as
    ``ray start`` and a first ``ray.init`` do: Ray's own ``_enable_token_auth``)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _link(value: Link | Mapping[str, Any]) -> Link:
    """A link from the config: built already, or its keys."""
    return value if isinstance(value, Link) else Link(**dict(value))


def _minus(after: Mapping[str, int], before: Mapping[str, int]) -> dict[str, int]:
    return {key: after[key] - before.get(key, 0) for key in after}


def _up(box: Box, temp: Path, starts: Mapping[int, list[str]], store: int, deadline: float) -> None:
    """``ray start`` node ``k`` with ``starts[k]`` (0: the head) for every ``k`` at once,
    and wait until all are up.

    Ray gives a starting raylet 30 s to register with the GCS, a constant in its code; a
    machine busy enough to miss it fails the start, which is tried again (the node's
    processes killed first) until ``deadline``. Another failure, or the deadline, raises
    with the node's log.
    """
    running = {k: _ray_start(box, k, temp, args, store) for k, args in starts.items()}
    while running:
        k, proc = running.popitem()
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code == 0:
            continue
        log = (temp / f"{k}.log").read_text(errors="replace")
        if RAYLET_SLOW in log and time.monotonic() < deadline:
            netbox.stop(box.processes(k))
            running[k] = _ray_start(box, k, temp, starts[k], store)
            continue
        what = "the head" if k == 0 else f"node {k}"
        raise RuntimeError(f"ray start of {what} in the box failed ({code}):\n{log[-2000:]}")


def _ray_start(box: Box, k: int, temp: Path, args: list[str], store: int) -> subprocess.Popen:
    """``ray start`` in node ``k``'s namespace (0: the head), logging to ``temp/<k>.log``;
    the command ends once its node is up."""
    ns = box.head if k == 0 else box.nodes[k - 1]
    cmd = [
        "ip", "netns", "exec", ns, sys.executable, "-c", RAY_CLI, "start", *args,
        f"--node-ip-address={box.address(k)}", "--num-gpus=0", f"--object-store-memory={store}",
        f"--temp-dir={temp / str(k)}", "--disable-usage-stats",
    ]  # fmt: skip
    with open(temp / f"{k}.log", "a") as out:  # a retry's log follows the failed start's
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
