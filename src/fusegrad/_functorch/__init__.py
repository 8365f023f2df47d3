"""PyTorch's `torch._functorch` spellings of AOT autograd (fusegrad/compiler/aot)."""
