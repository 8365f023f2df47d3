"""`python -m fusegrad ...` is the `fusegrad` command."""

import sys

from .cli import main

sys.exit(main())
