import os
import sys

from runplane.runner.main import main_handing_over, main_on_standby
from runplane.runner.standby_pool import TICKET, main_in_pool

if sys.argv[1:] == ["--standby"]:
    sys.exit(main_on_standby())
# A task of the standby pool (docs/standby.md): started with a ticket, not a run.
sys.exit(main_in_pool(main_handing_over) if TICKET in os.environ else main_handing_over())
