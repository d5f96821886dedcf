#!/usr/bin/python3
"""nvidia-bug-report.sh on a simulated host (reprofleet.sim): writes nvidia-bug-report.log.gz here."""
import sys

from rfsim.bug_report import main

sys.exit(main(sys.argv[1:]))
