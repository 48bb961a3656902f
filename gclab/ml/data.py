"""Datasets as uint8 tensors: CIFAR-10 (torchvision), any ImageFolder tree, synthetic.

Images are decoded once into ``uint8 [N, 3, H, W]`` tensors (ImageFolder trees are
cached beside the data as ``.npz``, no pickle) so that workers slice, augment and
normalise whole batches of tensors instead of per-PIL-image transforms.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch

from gclab.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageData:
    """A train/test split as uint8 images ``[N, C, H, W]`` and int64 labels."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int

    def channel_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel mean and std of the training images, in [0, 1] units."""
        total = torch.zeros(3, dtype=torch.float64)
        squares = torch.zeros(3, dtype=torch.float64)
        for chunk in self.train_x.split(4096):  # bounded memory: no float copy of all images
            values = chunk.to(torch.float64)
            total += values.sum(dim=(0, 2, 3))
            squares += values.square().sum(dim=(0, 2, 3))
        count = self.train_x.numel() / self.train_x.shape[1]
        mean = total / count
        std = (squares / count - mean.square()).clamp_min(0).sqrt()
        return (mean / 255).float(), (std / 255).float()


class DataSource(ABC):
    """A configured dataset: validated in ``__init__`` (cheap), loaded by :meth:`load`."""

    augment: bool = True

    @abstractmethod
    def load(self) -> ImageData:
        """Read (or generate) the images; may take seconds, so it runs once per run."""


def _absolute(root: str) -> Path:
    # Ray actors and Hydra jobs do not share the launch directory: resolve now.
    return Path(os.path.expanduser(root)).resolve()


class CIFAR10Data(DataSource):
    """torchvision's CIFAR-10 (downloaded into ``root`` on first use).

    ``verify=False`` reads a ``cifar-10-batches-py`` folder in the same layout whose
    MD5 sums differ from the official release (a re-encoded or generated copy), with
    an unpickler that only accepts numpy arrays, lists and dicts: never arbitrary code.
    """

    def __init__(
        self,
        root: str = "~/.cache/gclab/cifar10",
        download: bool = True,
        verify: bool = True,
        augment: bool = True,
    ) -> None:
        self.root = _absolute(root)
        self.download = download
        self.verify = verify
        self.augment = augment

    def load(self) -> ImageData:
        from torchvision.datasets import CIFAR10

        if not self.verify:
            return _read_cifar_batches(self.root / CIFAR10.base_folder)
        try:
            train = CIFAR10(str(self.root), train=True, download=self.download)
            test = CIFAR10(str(self.root), train=False, download=self.download)
        except Exception as exc:  # network errors, corrupted or missing files
            raise ConfigError(
                f"root={self.root} does not hold CIFAR-10 and it could not be downloaded "
                f"({type(exc).__name__}: {exc}); put the extracted 'cifar-10-batches-py' "
                "folder there, or use data=image_folder data.root=<tree with train/ and "
                "test/>, or data=synthetic for an offline run.",
                param="root",
            ) from exc

        def tensors(ds) -> tuple[torch.Tensor, torch.Tensor]:
            x = torch.from_numpy(np.ascontiguousarray(ds.data.transpose(0, 3, 1, 2)))
            return x, torch.as_tensor(ds.targets, dtype=torch.int64)

        return ImageData(*tensors(train), *tensors(test), num_classes=len(train.classes))


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Unpickles CIFAR batch files: numpy arrays and builtins, nothing executable."""

    ALLOWED: ClassVar[set[tuple[str, str]]] = {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")
        return super().find_class(module, name)


def _read_cifar_batches(folder: Path) -> ImageData:
    def read(name: str) -> dict:
        path = folder / name
        if not path.is_file():
            raise ConfigError(
                f"verify=false needs the CIFAR-10 python layout, but {path} is missing.",
                param="verify",
            )
        with open(path, "rb") as f:
            return _ArraysOnlyUnpickler(f, encoding="latin1").load()

    def split(names: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        batches = [read(n) for n in names]
        x = np.concatenate([np.asarray(b["data"], dtype=np.uint8) for b in batches])
        y = np.concatenate([np.asarray(b.get("labels", b.get("fine_labels"))) for b in batches])
        return torch.from_numpy(x.reshape(-1, 3, 32, 32).copy()), torch.from_numpy(y).long()

    train = split([f"data_batch_{i}" for i in range(1, 6)])
    test = split(["test_batch"])
    num_classes = len(read("batches.meta")["label_names"])
    return ImageData(*train, *test, num_classes=num_classes)


class ImageFolderData(DataSource):
    """Any ``root/train/<class>/*`` + ``root/test/<class>/*`` image tree of one image size."""

    def __init__(self, root: str, cache: bool = True, augment: bool = True) -> None:
        self.root = _absolute(root)
        missing = [split for split in ("train", "test") if not (self.root / split).is_dir()]
        if missing:
            raise ConfigError(
                f"root={self.root} has no {' or '.join(missing)}/ folder; image_folder "
                "needs root/train/<class>/ and root/test/<class>/ (e.g. written by "
                "shared/data/make_cifar10.py).",
                param="root",
            )
        self.cache = cache
        self.augment = augment

    def load(self) -> ImageData:
        train_x, train_y, classes = self._split("train")
        test_x, test_y, test_classes = self._split("test")
        if classes != test_classes:
            raise ConfigError(
                f"root={self.root}: train/ and test/ have different class folders "
                f"({classes} vs {test_classes}).",
                param="root",
            )
        return ImageData(train_x, train_y, test_x, test_y, num_classes=len(classes))

    def _split(self, split: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        from torchvision.datasets import ImageFolder

        try:
            folder = ImageFolder(str(self.root / split))
        except FileNotFoundError:  # no class folder, or no file with an image extension
            raise ConfigError(
                f"root={self.root}: {split}/ holds no images in class folders; "
                f"image_folder needs root/{split}/<class>/<image file>.",
                param="root",
            ) from None
        listing = "\n".join(f"{p}:{os.path.getsize(p)}" for p, _ in folder.samples)
        digest = hashlib.sha1(listing.encode()).hexdigest()[:16]
        cache = self.root / f".gclab-cache-{split}-{digest}.npz"
        if self.cache and cache.is_file():
            with np.load(cache, allow_pickle=False) as f:
                return torch.from_numpy(f["x"]), torch.from_numpy(f["y"]), folder.classes
        x, y = _decode_images(folder.samples)
        if self.cache:
            _atomic_savez(cache, x=x.numpy(), y=y.numpy())
        return x, y, folder.classes


def _decode_images(samples: list[tuple[str, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    from PIL import Image

    images = []
    for path, _ in samples:
        try:
            with Image.open(path) as img:
                images.append(np.asarray(img.convert("RGB")))
        except OSError as exc:  # PIL's UnidentifiedImageError, truncated or unreadable files
            raise ConfigError(
                f"image_folder cannot read {path} as an image ({type(exc).__name__}); "
                "fix or remove it."
            ) from None
    shapes = {im.shape for im in images}
    if len(shapes) != 1:
        raise ConfigError(f"image_folder images must all have one size; found {sorted(shapes)}.")
    x = torch.from_numpy(np.stack(images).transpose(0, 3, 1, 2).copy())
    return x, torch.as_tensor([label for _, label in samples], dtype=torch.int64)


def _atomic_savez(path: Path, **arrays: np.ndarray) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npz")
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except OSError as exc:  # read-only data folder: decoding again next time is fine
        log.warning("could not cache decoded images at %s: %s", path, exc)
        tmp.unlink(missing_ok=True)


class SyntheticData(DataSource):
    """A seeded, learnable, CIFAR-shaped dataset: one smooth template per class plus noise."""

    def __init__(
        self,
        train_size: int = 4096,
        test_size: int = 1024,
        num_classes: int = 10,
        noise: float = 1.0,
        seed: int = 0,
        augment: bool = False,
    ) -> None:
        for key, value in (("train_size", train_size), ("test_size", test_size)):
            if value < 1:
                raise ConfigError(f"{key}={value} is invalid: it must be >= 1.", param=key)
        if num_classes < 2:
            raise ConfigError(
                f"num_classes={num_classes} is invalid: it must be >= 2.", param="num_classes"
            )
        if noise < 0:
            raise ConfigError(f"noise={noise} is invalid: it must be >= 0.", param="noise")
        self.sizes = (train_size, test_size)
        self.num_classes, self.noise, self.seed, self.augment = num_classes, noise, seed, augment

    def load(self) -> ImageData:
        gen = torch.Generator().manual_seed(self.seed)
        coarse = torch.rand(self.num_classes, 3, 4, 4, generator=gen)
        templates = torch.nn.functional.interpolate(coarse, size=32, mode="bilinear")

        def draw(size: int) -> tuple[torch.Tensor, torch.Tensor]:
            y = torch.randint(0, self.num_classes, (size,), generator=gen)
            x = templates[y] + self.noise * torch.randn(size, 3, 32, 32, generator=gen)
            return (x.clamp(0, 1) * 255).round().to(torch.uint8), y

        return ImageData(*draw(self.sizes[0]), *draw(self.sizes[1]), self.num_classes)
