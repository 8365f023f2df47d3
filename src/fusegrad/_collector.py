"""The garbage collector held off while `import fusegrad` loads the core.

Loading the core makes tens of thousands of long-lived objects (registry entries, their Node
classes, the protocol wrappers). The collector's passes over them while they are being made
free nothing and cost about a seventh of the import, so the package runs its loading inside
`CollectorPaused()`.
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
        if self.was_enabled:
            gc.enable()
