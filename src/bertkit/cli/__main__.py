"""``python -m bertkit.cli`` (and ``torchrun -m bertkit.cli``) run the ``bertkit`` command."""

import sys

from bertkit.cli import main

sys.exit(main())
