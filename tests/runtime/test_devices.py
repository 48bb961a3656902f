"""Device selection for workers and server, and the compute-time rule that follows (CPU only).

GPUs are pretended (``visible_gpus`` and ``torch.cuda.is_available`` patched): what is
checked is the selection logic, which runs before Ray starts.
"""

import pytest
import torch

from gclab.errors import ConfigError
from gclab.ml.batches import Normalizer, augment
from gclab.ml.gradients import FlatModel, loss_and_gradient, to_host
from gclab.ml.models import SmallCNN
from gclab.runtime import devices
from gclab.runtime.cluster import Cluster
from gclab.runtime.timing import ComputeTime, resolve


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "visible_gpus", lambda: 2.0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize(
    ("setting", "gpus", "device"),
    [("auto", 0, "cpu"), ("cpu", 0, "cpu"), ("auto", 1, "cuda"), ("auto", 0.25, "cuda"),
     ("cuda", 0.5, "cuda")],
)  # fmt: skip
def test_workers_go_where_their_reserved_gpus_are(two_gpus, setting, gpus, device) -> None:
    assert devices.worker_device(setting, gpus, check_visible=True) == device


@pytest.mark.parametrize(
    ("workers", "setting", "server"),
    [("cuda", "auto", "cuda"), ("cpu", "auto", "cpu"), ("cpu", "cuda", "cuda"),
     ("cuda", "cpu", "cpu")],
)  # fmt: skip
def test_server_follows_the_workers_unless_told(two_gpus, workers, setting, server) -> None:
    assert devices.server_device(setting, workers) == server


def test_without_a_gpu_auto_stays_on_the_cpu_and_cuda_is_refused() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert devices.worker_device("auto", 0, check_visible=True) == "cpu"
    assert devices.server_device("auto", "cpu") == "cpu"
    with pytest.raises(ConfigError, match=r"^device=cuda with .* none is visible"):
        devices.worker_device("cuda", 1, check_visible=True)
    # joining a cluster by address, the GPUs are checked once Ray answers
    assert devices.worker_device("cuda", 1, check_visible=False) == "cuda"


def test_gpu_workers_get_one_actor_per_gpu_and_cuda_events(two_gpus) -> None:
    cluster = Cluster(workers=8, worker_gpus=1)
    assert cluster.device == "cuda" and cluster.server_device == "cuda"
    assert cluster.compute_time is ComputeTime.cuda
    assert cluster.default_actors(cpus=32, gpus=2) == 2
    assert Cluster(workers=8).default_actors(cpus=32, gpus=2) == 8  # CPU workers: cores


@pytest.mark.parametrize(
    ("setting", "device", "threads", "pattern"),
    [("cpu", "cuda", 1, r"compute_time=cpu would miss the GPU work"),
     ("cuda", "cpu", 1, r"compute_time=cuda times GPU work, but the workers compute on the CPU"),
     ("cpu", "cpu", 2, r"compute_time=cpu measures one thread's CPU time")],
)  # fmt: skip
def test_unfaithful_compute_times_are_refused(setting, device, threads, pattern) -> None:
    with pytest.raises(ConfigError, match=pattern):
        resolve(setting, device, threads)


def test_cpu_path_is_device_generic_and_unchanged() -> None:
    """What a worker does on its device, on the CPU: host copies are the tensors themselves."""
    torch.manual_seed(0)
    flat = FlatModel(SmallCNN(width=4))
    x = torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8)
    offsets = torch.randint(0, 9, (6, 2)).numpy()
    flips = (torch.rand(6) < 0.5).numpy()
    batch = Normalizer(torch.full((3,), 0.5), torch.full((3,), 0.25))(augment(x, offsets, flips))
    loss, grad = loss_and_gradient(flat, batch, torch.arange(6) % 10)
    assert loss.dim() == 0 and to_host(grad) is grad
    _, grad16 = loss_and_gradient(flat, batch, torch.arange(6) % 10, bf16=True)
    assert grad16.dtype == torch.float32  # autocast changes the forward pass, not the result type
    assert float((grad16 - grad).abs().max()) < 0.1 * float(grad.abs().max())
