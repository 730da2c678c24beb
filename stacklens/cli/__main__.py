"""`python -m stacklens.cli`: the same as the `stacklens` console script."""

import sys

from stacklens.cli import main

sys.exit(main())
