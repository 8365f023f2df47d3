"""`import fusegrad` beside `import torch`: each import timed in a fresh process.

Each run starts `python -X importtime -c "import <name>"` and reads the interpreter's own
import log: the total is the top-level module's cumulative time, and fusegrad's own share is
the sum of the self times of the `fusegrad.*` modules (NumPy and the standard library are
counted in the total only). The two frameworks alternate, run after run, so machine noise
hits both alike; each figure is the median over the runs.

Bytecode is cached in a private folder (`PYTHONPYCACHEPREFIX`) filled by one untimed import
of each framework first, so the figures show a normal installation's import, not compiling
(`PYTHONDONTWRITEBYTECODE` in the environment would otherwise compile every module each time).

Run from the repository root: `python benchmarks/import_time.py` (`--runs 5` by default,
`--markdown` for a table).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Imported by PyTorch lazily or not at all; `import fusegrad` must not load them either.
MUST_NOT_LOAD = ("ml_dtypes", "tqdm", "numpy.random", "fusegrad.nn", "fusegrad.compiler",
                 "fusegrad.onnx", "fusegrad.fx", "fusegrad.optim", "fusegrad.utils.data", "scipy",
                 "fusegrad.storage", "fusegrad.ops._onnx_mappings", "fusegrad._meta",
                 "fusegrad._fake")


@dataclass
class Sample:
    """One fresh import: the total, the framework's own modules and the loaded names."""

    total_ms: float
    own_ms: float
    numpy_ms: float
    loaded: frozenset


def _env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "fusegrad-import-time-pyc")
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def import_once(name: str, env: dict) -> Sample:
    """Import `name` in a fresh interpreter and read its `-X importtime` log."""
    probe = (f"import sys; import {name}; "
             f"print(' '.join(m for m in {MUST_NOT_LOAD!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], env=env,
                          capture_output=True, text=True, check=True)
    total = own = numpy = 0.0
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line or "self" in line:
            continue
        self_us, cumulative_us, module = line[len("import time:"):].split("|")
        module = module.strip()
        if module == name:
            total = int(cumulative_us) / 1000
        if module == name or module.startswith(name + "."):
            own += int(self_us) / 1000
        if module == "numpy" and len(cumulative_us) - len(cumulative_us.lstrip()) > 0:
            numpy = max(numpy, int(cumulative_us) / 1000)
    return Sample(total, own, numpy, frozenset(proc.stdout.split()))


def main() -> None:
    """Time the imports, alternating frameworks, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="fresh imports of each framework")
    parser.add_argument("--markdown", action="store_true", help="print a GitHub table")
    args = parser.parse_args()
    env = _env()
    for name in ("fusegrad", "torch"):  # untimed: fills the bytecode cache
        import_once(name, env)
    samples: dict[str, list[Sample]] = {"fusegrad": [], "torch": []}
    for run in range(args.runs):
        order = ("fusegrad", "torch") if run % 2 == 0 else ("torch", "fusegrad")
        for name in order:
            samples[name].append(import_once(name, env))
    fg, th = samples["fusegrad"], samples["torch"]
    med = statistics.median
    fg_total, fg_own, th_total = (med(s.total_ms for s in fg), med(s.own_ms for s in fg),
                                  med(s.total_ms for s in th))
    fg_numpy = med(s.numpy_ms for s in fg)
    loaded = sorted(set().union(*(s.loaded for s in fg)))
    rows = [("import torch (total)", th_total, ""),
            ("import fusegrad (total)", fg_total, f"{fg_total / th_total:.3f}x torch"),
            ("  of which NumPy", fg_numpy, ""),
            ("  of which fusegrad's own modules", fg_own, "goal <= 50 ms")]
    print(f"median of {args.runs} fresh imports each, alternating; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.markdown:
        print("| import | ms | note |\n|---|---:|---|")
        for label, ms, note in rows:
            print(f"| {label.strip()} | {ms:.0f} | {note} |")
    else:
        for label, ms, note in rows:
            print(f"{label:36s} {ms:8.1f} ms  {note}")
    print("modules that must stay unloaded but were loaded:", ", ".join(loaded) or "none")


if __name__ == "__main__":
    main()
