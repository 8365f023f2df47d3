"""Draw the autograd graph of ResNet-18's loss into docs/images/resnet18_graph.png (README)."""

import pathlib

import fusegrad as torch
from fusegrad.models import resnet18
from fusegrad.viz import make_dot

OUT = pathlib.Path(__file__).resolve().parent.parent / "docs" / "images" / "resnet18_graph"


def main() -> None:
    """Build the graph of one cross-entropy loss on two 32x32 images and render it."""
    torch.manual_seed(0)
    model = resnet18(num_classes=10)
    loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 3, 32, 32)),
                                             torch.tensor([3, 7]))
    dot = make_dot(loss, params=dict(model.named_parameters()))
    dot.graph_attr.update(dpi="56")  # legible labels at a README-friendly file size
    print(dot.render(str(OUT), format="png", cleanup=True))


if __name__ == "__main__":
    main()
