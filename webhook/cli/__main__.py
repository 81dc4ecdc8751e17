"""`python -m gangkeeper.webhook.cli`: the same as the `gangkeeper` script."""

import sys

from .main import main

sys.exit(main())
