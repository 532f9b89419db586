"""The audit's world with and without its correction for the non-negative fit's bias, release by release
(`error_model.corrected_for_the_fits_bias`): the world's margins moved, in 3 rounds, by the released margins less the
mean margins of 8 releases of it, as the audit does since stop 49, against the world without that step.

    python benchmarks/bench_error_model_bias.py [--releases N] [--jobs J] > reports/benchmarks/error_model_bias.txt

Why: a non-negative fit with its total pinned biases an empty or small cell up and a dense one down, so the released
margins are flatter than the truth's, and a world built on them is too; where the validation
(`benchmarks/bench_error_model.py`) missed most (Rochdale's two-way margins at epsilon 0.05 and 0.1), the audit
understated the error. Per point, N default releases of the true table (the validation's seeds, 1000 r + 7), each
audited both ways (`error_model.released_table_errors`; without the correction by replacing it with the world as it
is), against 300 further releases of the true table for the realised mean (the stream SimulationNoise(7_000_001)):
realised / stated mean L1 and the stated 95% quantile's coverage of each release's own error, both ways on the same
releases (so their difference is measured more precisely than either; the standard error printed beside the change
is that of the mean over releases of each release's own change of realised / its stated mean), and each margin's
realised / stated range. Every figure is computed by this run.
"""

from __future__ import annotations

import platform

import numpy as np
from bench_error_model_shrink import TRUTH_RUNS, paired_audits, run  # the shrink's paired comparison, another step

import tabrelease as tr
from tabrelease import error_model as em

POINTS = (("rochdale", "all-2-way", 0.05), ("rochdale", "all-2-way", 0.1), ("journey_to_work", "model", 0.05),
          ("journey_to_work", "model", 0.1), ("edwards", "all-2-way", 0.05), ("edwards", "all-2-way", 0.1),
          ("czech", "all-2-way", 0.05))


def point(args) -> dict:
    return paired_audits(args, "corrected_for_the_fits_bias",
                         lambda plan, world, released, seed: (np.asarray(world, float), None))[0]


def main() -> None:
    args, found, seconds = run(point, POINTS)
    print(f"python {platform.python_version()}, {platform.machine()}, tabrelease {tr.__version__}; per point "
          f"{args.releases} default releases audited without the correction and with it, as the audit does ("
          f"{em.BIAS_ROUNDS} rounds of {em.BIAS_RELEASES} releases), {TRUTH_RUNS} further releases for the realised "
          f"mean; {seconds:.0f} s on {args.jobs} processes")
    print(f"{'point':<30} {'realised/stated uncorrected':>28} {'corrected':>10} {'change (se)':>14} "
          f"{'coverage uncorrected':>21} {'corrected':>10}  by margin uncorrected / corrected")
    for r in found:
        change = r["candidate"] - r["as_is"]
        print(f"{r['point']:<30} {r['as_is']:>28.3f} {r['candidate']:>10.3f} "
              f"{change:>+7.3f} ({r['change_se']:.3f}) {r['cover_as_is']:>21.1%} {r['cover_candidate']:>10.1%}  "
              f"{r['margins_as_is'].min():.3f}-{r['margins_as_is'].max():.3f} / "
              f"{r['margins_candidate'].min():.3f}-{r['margins_candidate'].max():.3f}")


if __name__ == "__main__":
    main()
