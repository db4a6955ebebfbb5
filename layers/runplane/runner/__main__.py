import sys

from runplane.runner.main import main_handing_over, main_on_standby

sys.exit(main_on_standby() if sys.argv[1:] == ["--standby"] else main_handing_over())
