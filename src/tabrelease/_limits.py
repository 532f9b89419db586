"""How large a grid of simulated releases may be (sweeps, the reproduction, the frontier). Kept apart, with no
imports, so that the command line checks an argument against them before loading numpy or pandas.

A grid past these is a typo (--repetitions 1000000000000) or a trick, not a study: it would start, hold every
run's row in memory and never finish. The paper's reproduction is 200 epsilons x 50 repetitions x 4 tables x 2
calibrations = 80,000 runs.
"""

MAX_EPSILONS = 10_000  # values of epsilon in one grid
MAX_REPETITIONS = 10_000  # repetitions of each grid point (all of one point's releases are held at once)
MAX_RUNS = 1_000_000  # releases in one sweep
# The most records the Gaussian copula draws (copula.py): the mechanism refuses a table of more before its charge (a
# limit of this tool's time, stated in public: it says only that n is above it), and the records drawn, as many as
# the noisy total says, are capped at it (at a very small epsilon that total may be far above n).
MAX_SYNTHETIC_RECORDS = 2 * 10**8
