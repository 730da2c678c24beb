"""`python -m stacklens_cli`: the same as the `stacklens` console script."""

import sys

from stacklens_cli import main

sys.exit(main())
