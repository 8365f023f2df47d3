"""The joint-graph partitioners at torch._functorch.partitioners' spelling."""

from ..compiler.aot.partitioners import default_partition, min_cut_rematerialization_partition

__all__ = ["default_partition", "min_cut_rematerialization_partition"]
