"""A network in a box: Linux network namespaces joined by a bridge, each node's link
shaped and lossy.

A :class:`Box` holds a *head* namespace and one namespace per node. The head namespace
holds a bridge (``br0``, ``10.47.0.1``); node ``k`` (1, 2, ...) reaches it through a
veth pair, ``eth0`` (``10.47.0.<k+1>``) in the node's namespace and ``n<k>`` on the
bridge. Nothing of the box is in the host's namespace, so its addresses and ports
never meet anyone else's, and its traffic stays between its own namespaces.

Each node's link is shaped in both directions by a token bucket (``tc tbf`` on ``eth0``
for what the node sends, on ``n<k>`` for what it receives) at the link's ``bandwidth``
bytes/s, and loses each IP packet crossing it, in either direction, with probability
``loss`` (nftables in the node's namespace: ``numgen random``; the kernel here has no
``netem``). The veths send packets of at most ``mtu`` bytes one by one (no
segmentation offload), so a loss is one IP packet's, and the bucket's queue is long
(:data:`QUEUE_SECONDS`) so that it drops nothing itself: every loss is a drawn one. TCP
runs with the host's default congestion control (a namespace may only choose among the
host's ``tcp_allowed_congestion_control``): :func:`congestion` names it. nftables also
counts each link's packets and drops, which :meth:`Box.traffic` reads with the devices'
byte counters.

Building needs root, ``ip``, ``tc`` and ``nft`` (:func:`check_host`). Removing kills
every process left in the box's namespaces (but the caller), then deletes its links and
namespaces; it also runs when building fails, and ignores SIGINT and SIGTERM while it
runs (a few seconds at most), so a second Ctrl-C cannot leave half a box. A box whose
process died without removing it (SIGKILL) is removed by the next box built on the
machine (:func:`sweep`): its namespaces are named after the pid that built it.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gclab.errors import ConfigError
from gclab.rundir.lock import pid_alive

log = logging.getLogger(__name__)

#: The box's subnet: the head is ``.1``, node ``k`` is ``.<k+1>``.
SUBNET = "10.47.0"
#: Namespace names: ``gclab-<pid>-<box>-h`` (head) and ``gclab-<pid>-<box>-<k>`` (nodes).
PREFIX = "gclab"
#: Seconds of traffic a link's token bucket may queue (long: the bucket drops nothing).
QUEUE_SECONDS = 2.0
#: Seconds removing a box waits for its killed processes to be gone.
GRACE = 5.0
#: Resolution of the loss probability: nftables draws ``numgen random mod LOSS_SCALE``.
LOSS_SCALE = 1_000_000
#: The commands a box is built with.
TOOLS = ("ip", "tc", "nft")

_CLONE_NEWNET = 0x40000000
_boxes = itertools.count()


@dataclass
class Link:
    """One node's link: ``bandwidth`` bytes/s in each direction and ``loss``, the
    probability that an IP packet crossing it (either way) is lost. In a per-node
    override (``cluster.node_links``) ``None`` keeps the value of ``cluster.link``."""

    bandwidth: float | None = None
    loss: float | None = None

    def check(self) -> Link:
        """This link if both values are valid; else :class:`ConfigError` naming the bad one."""
        b, p = self.bandwidth, self.loss
        if not (_real(b) and math.isfinite(b) and b > 0):
            raise ConfigError(
                f"bandwidth={b!r} is invalid: it must be a rate in bytes/s > 0 "
                "(1.25e7 is 100 Mbit/s).",
                param="bandwidth",
            )
        if not (_real(p) and 0 <= p < 1):
            raise ConfigError(
                f"loss={p!r} is invalid: it must be a probability in [0, 1) "
                "(the share of IP packets the link loses in each direction).",
                param="loss",
            )
        return Link(float(b), float(p))

    def over(self, default: Link) -> Link:
        """This override applied to ``default``: its ``None`` values are the default's."""
        return Link(
            default.bandwidth if self.bandwidth is None else self.bandwidth,
            default.loss if self.loss is None else self.loss,
        )


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_host() -> None:
    """Raise :class:`ConfigError` unless this machine can build a box: it must run as
    root, with ``ip``, ``tc`` and ``nft`` installed."""
    if os.geteuid() != 0:
        raise ConfigError(
            "cluster=netns builds network namespaces, which needs root; run as root "
            "(or in a container with CAP_NET_ADMIN and CAP_SYS_ADMIN), or use cluster=local."
        )
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        package = {"ip": "iproute2", "tc": "iproute2", "nft": "nftables"}
        names = sorted({package[t] for t in missing})
        raise ConfigError(
            f"cluster=netns needs the command(s) {', '.join(missing)}, which are not "
            f"installed; install {' and '.join(names)} (apt-get install -y {' '.join(names)})."
        )


def goodput(mtu: int) -> float:
    """The share of a busy link's bytes that is TCP payload: an IP packet of ``mtu``
    bytes carries ``mtu − 52`` (IPv4 20, TCP 20, its timestamp option 12) in ``mtu + 14``
    bytes on the link (the token bucket counts the Ethernet header too)."""
    return (mtu - 52) / (mtu + 14)


def congestion() -> str:
    """The TCP congestion control the box's namespaces use: the host's default."""
    return Path("/proc/sys/net/ipv4/tcp_congestion_control").read_text().strip()


class Box:
    """The namespaces, links and rules of one box; a context manager that builds and
    removes them (see the module docstring)."""

    def __init__(self, links: Sequence[Link], mtu: int = 9000) -> None:
        self.links = [link.check() for link in links]
        self.mtu = mtu
        tag = f"{PREFIX}-{os.getpid()}-{next(_boxes)}"
        #: The head's namespace (bridge, Ray head, driver) and each node's.
        self.head = f"{tag}-h"
        self.nodes = [f"{tag}-{k}" for k in range(1, len(self.links) + 1)]

    @staticmethod
    def address(node: int) -> str:
        """The IP address of node ``node`` (0: the head)."""
        return f"{SUBNET}.{node + 1}"

    def __enter__(self) -> Box:
        sweep()
        try:
            self._build()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _build(self) -> None:
        head, frame = self.head, self.mtu + 14  # an Ethernet frame's bytes: what tbf counts
        _run("ip", "netns", "add", head)
        _ip(head, "link", "set", "lo", "up")
        _ip(head, "link", "add", "br0", "mtu", self.mtu, "type", "bridge")
        _ip(head, "addr", "add", f"{self.address(0)}/24", "dev", "br0")
        _ip(head, "link", "set", "br0", "up")
        for k, (ns, link) in enumerate(zip(self.nodes, self.links), start=1):
            _run("ip", "netns", "add", ns)
            _ip(ns, "link", "set", "lo", "up")
            _run(
                "ip", "link", "add", f"n{k}", "netns", head, "mtu", self.mtu, "type", "veth",
                "peer", "name", "eth0", "netns", ns, "mtu", self.mtu,
            )  # fmt: skip
            for where, dev in ((head, f"n{k}"), (ns, "eth0")):  # one IP packet per skb
                _ip(where, "link", "set", dev, "gso_max_size", self.mtu, "gso_max_segs", 1)
                _shape(where, dev, link.bandwidth, frame)
            _ip(head, "link", "set", f"n{k}", "master", "br0", "up")
            _ip(ns, "addr", "add", f"{self.address(k)}/24", "dev", "eth0")
            _ip(ns, "link", "set", "eth0", "up")
            _run("nft", "-f", "-", ns=ns, text=_rules(link.loss))

    def processes(self, node: int | None = None) -> list[int]:
        """Pids of the processes in node ``node``'s namespace (0: the head; ``None``: in
        any of the box's), this process left out."""
        spaces = [self.head, *self.nodes]
        pids: set[int] = set()
        for ns in spaces if node is None else [spaces[node]]:
            pids.update(_pids(ns))
        pids.discard(os.getpid())
        return sorted(pids)

    def traffic(self) -> list[dict[str, int]]:
        """Per node: bytes and IP packets its link carried up (sent by the node) and
        down, and the packets the link lost each way (nftables' counters)."""
        out = []
        for ns in self.nodes:
            stats = json.loads(_ip(ns, "-j", "-s", "link", "show", "dev", "eth0"))[0]
            listed = _run("nft", "-j", "list", "counters", "table", "inet", "gclab", ns=ns)
            counters = json.loads(listed)
            named = {
                item["counter"]["name"]: item["counter"]["packets"]
                for item in counters["nftables"]
                if "counter" in item
            }
            out.append({
                "up_bytes": stats["stats64"]["tx"]["bytes"],
                "down_bytes": stats["stats64"]["rx"]["bytes"],
                **named,
            })  # fmt: skip
        return out

    def remove(self) -> None:
        """Kill the box's processes, delete its links and namespaces (see the module
        docstring); SIGINT and SIGTERM are ignored meanwhile."""
        with _uninterrupted():
            _remove([self.head, *self.nodes])


def _remove(namespaces: list[str]) -> None:
    """Remove the box of ``namespaces`` (those that exist), whatever state it is in."""
    present = [ns for ns in namespaces if ns in set(_namespaces())]
    pids = sorted({p for ns in present for p in _pids(ns)} - {os.getpid()})
    stop(pids)
    for ns in present:
        for dev in _devices(ns):  # a veth goes with its peer; the bridge with its ports
            _run("ip", "-n", ns, "link", "del", dev, check=False)
        _run("ip", "netns", "del", ns, check=False)


def stop(pids: Sequence[int], grace: float = GRACE) -> None:
    """SIGKILL ``pids`` and wait up to ``grace`` seconds until they are gone.

    No grace before the kill: the box's processes keep nothing worth a clean stop (Ray's
    temporary files are the caller's to delete), and Ray's own stop takes seconds.
    """
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = [pid for pid in alive if pid_alive(pid)]


def sweep() -> None:
    """Remove the boxes whose process died without removing them (named after its pid)."""
    owners: dict[int, list[str]] = {}
    for ns in _namespaces():
        found = re.fullmatch(rf"{PREFIX}-(\d+)-\d+-(?:h|\d+)", ns)
        if found:
            owners.setdefault(int(found.group(1)), []).append(ns)
    for pid, namespaces in owners.items():
        if pid != os.getpid() and not pid_alive(pid):
            log.warning("removing the network box of process %d, which ended without it", pid)
            with _uninterrupted():
                _remove(namespaces)


def boxes() -> list[str]:
    """The namespaces of every box on the machine (any process's)."""
    return [ns for ns in _namespaces() if re.fullmatch(rf"{PREFIX}-\d+-\d+-(?:h|\d+)", ns)]


@contextmanager
def inside(ns: str) -> Iterator[None]:
    """Run the calling thread in the network namespace ``ns``, and back afterwards.

    Threads the calling thread starts meanwhile are born in ``ns`` and stay there, so a
    Ray driver connected inside lives in the box; other threads stay where they are.
    """
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _setns(f"/run/netns/{ns}")
        try:
            yield
        finally:
            _setns_fd(home)
    finally:
        os.close(home)


def _setns(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        _setns_fd(fd)
    finally:
        os.close(fd)


def _setns_fd(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM inside (main thread only; elsewhere nothing changes)."""
    try:
        before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: signals cannot be set here
        before = {}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _rules(loss: float) -> str:
    """nftables rules of a node's link: lose ``loss`` of its IP packets each way, count
    what passes and what is lost. Only ``eth0`` is touched: the node's own loopback
    traffic (a raylet and its workers) crosses no link."""
    drop = round(loss * LOSS_SCALE)
    lines = ["table inet gclab {"]
    lines += [f"  counter {name} {{}}" for name in ("up", "down", "up_lost", "down_lost")]
    for chain, hook, dev in (("up", "output", "oifname"), ("down", "input", "iifname")):
        lines.append(f"  chain {chain} {{")
        lines.append(f"    type filter hook {hook} priority 0; policy accept;")
        if drop:
            lines.append(
                f'    {dev} "eth0" numgen random mod {LOSS_SCALE} < {drop} '
                f'counter name "{chain}_lost" drop'
            )
        lines.append(f'    {dev} "eth0" counter name "{chain}"')
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _shape(ns: str, dev: str, rate: float, frame: int) -> None:
    """A token bucket of ``rate`` bytes/s on ``dev``'s egress: two frames of burst (so a
    message is paced from its first bytes), a queue of :data:`QUEUE_SECONDS`."""
    queue = max(4 * frame, int(rate * QUEUE_SECONDS))
    _run(
        "tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
        "rate", f"{round(rate)}bps", "burst", 2 * frame, "limit", queue,
    )  # fmt: skip


def _ip(ns: str, *args: object) -> str:
    return _run("ip", "-n", ns, *args)


def _run(*args: object, ns: str | None = None, text: str | None = None, check: bool = True) -> str:
    """Run a command (in namespace ``ns``); its stdout. A failure raises with its stderr."""
    cmd = [str(a) for a in args]
    if ns is not None:
        cmd = ["ip", "netns", "exec", ns, *cmd]
    proc = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def _namespaces() -> list[str]:
    out = _run("ip", "-j", "netns", "list", check=False).strip()
    return [entry["name"] for entry in json.loads(out or "[]")]


def _pids(ns: str) -> list[int]:
    return [int(p) for p in _run("ip", "netns", "pids", ns, check=False).split()]


def _devices(ns: str) -> list[str]:
    """The box's devices in ``ns``: its veths and bridge (not ``lo``)."""
    out = _run("ip", "-n", ns, "-j", "link", "show", check=False).strip()
    return [d["ifname"] for d in json.loads(out or "[]") if d["ifname"] != "lo"]
