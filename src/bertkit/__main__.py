"""``python -m bertkit`` (and ``torchrun -m bertkit``) run the ``bertkit`` command."""

import sys

from bertkit.cli import main

sys.exit(main())
