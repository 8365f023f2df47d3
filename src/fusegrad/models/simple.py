"""Small reference models: an MLP and LeNet-5 (32x32 input)."""

from __future__ import annotations

from collections.abc import Sequence

from .. import nn


class MLP(nn.Sequential):
    """Linear layers with an activation between them (none after the last)."""

    def __init__(self, in_features: int, hidden: Sequence[int] = (128,), out_features: int = 10,
                 activation: type[nn.Module] = nn.ReLU, dropout: float = 0.0) -> None:
        layers: list[nn.Module] = []
        sizes = [in_features, *hidden]
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers.append(nn.Linear(a, b))
            layers.append(activation())
            if dropout:
                layers.append(nn.Dropout(dropout))
        layers.append(nn.Linear(sizes[-1], out_features))
        super().__init__(*layers)


class LeNet5(nn.Module):
    """LeNet-5 for 1x32x32 images: two conv + pool stages, three fully connected layers."""

    def __init__(self, num_classes: int = 10, in_channels: int = 1) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, num_classes))

    def forward(self, x):
        """Class scores for a batch of images."""
        return self.classifier(self.features(x))
