import sys

from runplane.runner.main import main

sys.exit(main())
