"""`fusegrad.models`: reference models (torchvision's names and state_dict layouts)."""

from .resnet import BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50
from .simple import MLP, LeNet5

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet34", "resnet50", "MLP",
           "LeNet5"]
