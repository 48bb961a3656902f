"""``cluster=netns``'s bad input: one sentence each, before anything is built (no root,
no namespace, no Ray needed; the machine's own check is replaced where a case is about
a value)."""

from __future__ import annotations

import pytest

from gclab.app import build
from gclab.errors import ConfigError
from gclab.runtime import netbox
from helpers.config import TINY, assert_one_sentence, compose_config

BOX = [*TINY, "cluster=netns", "network.clock=wall"]

CASES = [
    (["cluster.link.loss=1"],
     r"^cluster\.link\.loss=1\.0 is invalid: it must be a probability in \[0, 1\)"),
    (["cluster.link.loss=-0.01"], r"^cluster\.link\.loss=-0\.01 is invalid"),
    (["cluster.link.bandwidth=0"],
     r"^cluster\.link\.bandwidth=0\.0 is invalid: it must be a rate in bytes/s > 0"),
    (["cluster.link.bandwidth=-5"], r"^cluster\.link\.bandwidth=-5\.0 is invalid"),
    (["cluster.node_links=[{},{loss:1.5}]"],
     r"^cluster\.node_links\[1\]\.loss=1\.5 is invalid: it must be a probability"),
    (["cluster.node_links=[{},{},{}]"],
     r"^cluster\.node_links has 3 entries but cluster\.nodes=2; give at most one per node"),
    (["cluster.nodes=5"],
     r"^cluster\.nodes=5 is invalid: with cluster\.workers=4 a node would have no worker"),
    (["cluster.mtu=100"], r"^cluster\.mtu=100 is invalid: .* in 1280\.\.65535"),
    (["cluster.address=auto"], r"^cluster\.address='auto' is invalid with cluster=netns"),
    (["cluster.worker_gpus=1"], r"^cluster\.worker_gpus=1\.0 is invalid with cluster=netns"),
    (["network.clock=virtual"],
     r"^network\.clock=virtual does not measure the box: cluster=netns needs network\.clock=wall"),
    (["network.bandwidth=1e6"],
     r"^network\.bandwidth=1000000\.0 would charge the bytes a second time"),
]  # fmt: skip


@pytest.mark.parametrize(("extra", "pattern"), CASES)
def test_bad_values_fail_in_one_sentence(monkeypatch, extra, pattern) -> None:
    monkeypatch.setattr(netbox, "check_host", lambda: None)  # about values, not this host
    with pytest.raises(ConfigError) as info:
        build(compose_config([*BOX, *extra]))
    assert_one_sentence(str(info.value), pattern)


def test_not_root_fails_in_one_sentence(monkeypatch) -> None:
    monkeypatch.setattr(netbox.os, "geteuid", lambda: 1000)
    with pytest.raises(ConfigError) as info:
        build(compose_config(BOX))
    assert_one_sentence(
        str(info.value), r"^cluster=netns builds network namespaces, which needs root"
    )


def test_no_nftables_fails_in_one_sentence(monkeypatch) -> None:
    monkeypatch.setattr(netbox.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netbox.shutil, "which", lambda tool: None if tool == "nft" else tool)
    with pytest.raises(ConfigError) as info:
        build(compose_config(BOX))
    assert_one_sentence(
        str(info.value),
        r"^cluster=netns needs the command\(s\) nft, which are not installed; install "
        r"nftables \(apt-get install -y nftables\)\.",
    )
