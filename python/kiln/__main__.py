"""python -m kiln: the same as the `kiln` command."""

import sys

from ._cli import main

sys.exit(main())
