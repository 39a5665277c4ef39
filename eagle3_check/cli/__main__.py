"""`python -m eagle3_check.cli ...` is `eagle3-check ...` (handy without the console script)."""

import sys

from eagle3_check.cli import main

sys.exit(main())
