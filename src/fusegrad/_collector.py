"""The garbage collector held off while `import fusegrad` loads the core.

Loading the core makes tens of thousands of long-lived objects (registry entries, their Node
classes, the protocol wrappers). The collector's passes over them while they are being made
free nothing and cost about a seventh of the import, so the package runs its loading inside
`CollectorPaused()`, which also spares them the pass that would follow it.
"""

from __future__ import annotations

import gc


class CollectorPaused:
    """A block during which the collector does not run; it is switched back on afterwards
    only if it was on before (a program that turned it off keeps it off)."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info) -> None:
        # What the block made lives as long as the program. Left in the youngest generation,
        # it would all be walked by the collector's first pass after the block (a tenth of
        # the import); moved to the oldest at once, it is examined only by full collections,
        # as it would be after surviving two passes. `freeze` then `unfreeze` moves every
        # tracked object there without examining any; a program that froze objects of its
        # own keeps them frozen (the move is skipped).
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if self.was_enabled:
            gc.enable()
