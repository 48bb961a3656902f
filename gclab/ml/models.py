"""Models: a small CPU-friendly CNN and torchvision's ResNet-18 with the CIFAR stem."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from gclab.errors import ConfigError


def init_seed(seed: int, model: int) -> int:
    """The torch seed of model ``model``'s initial weights in a run with ``seed``: the seed
    itself for model 0 (a one-model run), a seed derived from both for the others, so
    interleaved models start apart."""
    if model == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(model)]).generate_state(1, np.uint64)[0])


class SmallCNN(nn.Module):
    """Three conv-ReLU-pool blocks and two linear layers (~0.36M parameters at width 32).

    No batch normalisation: its gradient depends only on each sample, so the sum of
    partial gradients equals the batch gradient and coded training is exactly SGD.
    """

    def __init__(self, num_classes: int = 10, width: int = 32) -> None:
        super().__init__()
        if width < 1:  # torch would build empty or negative layers and fail in a worker
            raise ConfigError(
                f"width={width} is invalid: it must be an integer >= 1.", param="width"
            )
        c1, c2, c3 = width, 2 * width, 4 * width
        self.features = nn.Sequential(
            nn.Conv2d(3, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        # CIFAR-sized input: three 2x pools leave 4x4 feature maps
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(c3 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def resnet18_cifar(num_classes: int = 10) -> nn.Module:
    """torchvision ResNet-18 with the CIFAR stem: 3×3 stride-1 first conv, no max-pool."""
    from torchvision.models import resnet18

    model = resnet18(num_classes=num_classes)
    model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model
