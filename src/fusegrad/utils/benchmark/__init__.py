"""`fusegrad.utils.benchmark` (torch.utils.benchmark): `Timer` for timing Python statements,
`Measurement` for the timings and their statistics, `Compare` for tables of them."""

from .utils.common import Measurement, TaskSpec, select_unit, trim_sigfig, unit_to_english
from .utils.compare import Compare
from .utils.timer import Language, Timer

__all__ = ["Compare", "Language", "Measurement", "TaskSpec", "Timer", "select_unit",
           "trim_sigfig", "unit_to_english"]
