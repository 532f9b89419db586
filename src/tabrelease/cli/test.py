"""`tabrelease test`: a log-linear model tested on a release's public margins, with a noise-aware p-value."""

from __future__ import annotations

from ._common import decimal_float, non_negative_int, positive_int, print_json


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "test",
        help="test a log-linear model on a release's public margins (a p-value that knows the noise)",
        description="Fit a hierarchical log-linear model to the released margins alone (reading only public/) and "
        "test it against the model of the released margins: G² with its nominal chi-squared p-value, and a "
        "noise-aware p-value from a parametric bootstrap through the published plan (tables drawn from the fitted "
        "model, released by the same plan with simulated noise, the same estimator and rounding, refitted).",
    )
    parser.add_argument("release", metavar="RELEASE_DIR", help="a release's folder, or its public/ folder")
    parser.add_argument("--model", required=True, help="bracket notation by variable names or letters, e.g. "
                        "'[sex,age][age,region]'; its margins must lie inside released ones")
    parser.add_argument("--bootstrap", type=int, default=None,  # the library says the least it takes (19)
                        help="replicates of the parametric bootstrap (default 500; at least 19)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the replicates (default 0)")
    parser.add_argument("--intervals", action="store_true", help="also noise-aware intervals for the model's cell "
                        "probabilities over each of its margins (basic bootstrap, from the same replicates)")
    parser.add_argument("--level", type=decimal_float, default=0.95, help="the intervals' confidence level (default 0.95)")
    parser.add_argument("--jobs", type=positive_int, default=1, help="worker processes for the bootstrap's releases "
                        "(default 1; the result is the same for any number)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (it is shown on standard error "
                        "when that is a terminal)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a summary")
    parser.set_defaults(run=run)


def run(args) -> int:
    from ..inference import DEFAULT_BOOTSTRAP, model_test

    result = model_test(args.release, args.model, bootstrap=DEFAULT_BOOTSTRAP if args.bootstrap is None
                        else args.bootstrap, seed=args.seed, level=args.level,
                        intervals=args.intervals, jobs=args.jobs, progress=False if args.quiet else None)
    if args.json:
        document = result.as_dict()
        if not args.intervals:
            document.pop("intervals")
            document.pop("level")
        print_json(document)
        return 0
    if result.bundle_mode != "release":  # as `release` says it of the bundle (a reviewer's trial: `test` did not)
        print(f"WARNING: the bundle was made in {result.bundle_mode} mode: not produced by a secure sampler; do not "
              "publish it")
    print(f"model        {result.model}, against the model of the released margins")
    print(f"G2           {result.g2:.3f} on {result.df} df")
    # No replicate reached the observed G2: the p-value is the smallest B replicates can give, 1 / (B + 1), and is
    # said as a bound (a new user read "0.0500, Monte Carlo error 0.0500" at B = 19 as an estimate).
    floor = result.p_value <= 1.0 / (result.bootstrap + 1) * (1 + 1e-12)
    shown = (f"<= {result.p_value:.4f} noise-aware (no replicate reached the observed G2: the smallest p-value "
             f"{result.bootstrap} replicates can give; more with --bootstrap)" if floor else
             f"{result.p_value:.4f} noise-aware, Monte Carlo error {result.p_value_error:.4f}")
    print(f"p-value      {shown} ({result.bootstrap} releases of tables drawn from the fitted model, n = "
          f"{result.n:.0f}, by the published plan; seed {result.seed})")
    # Said to be invalid, not only "nominal": on a release at epsilon 0.1 it rejected a true model in 95% of releases
    # (a reviewer's trial), and a reader looks G2 up against chi-squared on the df above.
    print(f"             {result.p_value_naive:.4g} nominal (chi-squared, as if the released margins were counts: not "
          "valid for a noisy release; for comparison only)")
    if args.intervals and result.intervals_note:
        print(result.intervals_note)
    elif args.intervals:
        print(f"the model's cell probabilities, each with its own {100 * result.level:g}% noise-aware interval (not "
              "simultaneous):")
        for cell in result.intervals:
            where = ", ".join(cell["shown"])
            print(f"  {where:<40} {cell['probability']:.4f}  [{cell['low']:.4f}, {cell['high']:.4f}]")
    return 0
