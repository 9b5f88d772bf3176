"""``python -m pyhudi.cli``: the ``pyhudi`` command."""

import sys

from pyhudi.cli.main import main

sys.exit(main())
