"""``python -m labkit.bench``: see ``labkit.bench.run.main``."""
import sys

from labkit.bench.run import main

sys.exit(main())
