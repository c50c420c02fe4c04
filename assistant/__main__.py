import sys

from debug_stuck.frontends.cli import main

sys.exit(main())
