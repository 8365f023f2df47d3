"""Capture: CPython bytecode -> FX graphs with guards and graph breaks (TorchDynamo's role)."""
