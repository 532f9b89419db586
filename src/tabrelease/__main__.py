import sys

from ._entry import entry

sys.exit(entry())
