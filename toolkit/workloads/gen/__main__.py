import sys

from toolkit.workloads.gen import main

sys.exit(main(sys.argv[1:]))
