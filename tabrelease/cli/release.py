"""`tabrelease release`: release margins of a table under differential privacy."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import TabreleaseError
from ._common import add_table_arguments, load_from_args, positive_float


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "release",
        help="release margins under differential privacy and write public/ and internal/ folders",
        description="Release the margins of a table under epsilon-DP (or (epsilon, delta)-DP for the gaussian "
        "mechanism). Writes DIR/public (the released margins and release.json) and DIR/internal (audit.json and "
        "audit.html, which compare the release with the confidential table).",
    )
    add_table_arguments(parser)
    parser.add_argument("--epsilon", required=True, type=positive_float, help="privacy loss epsilon (> 0)")
    parser.add_argument("--margins", help="margins to release, e.g. '[AB][BC]'; default: the table's paper model")
    # Checked by the API (importing it here would slow every command's start-up).
    parser.add_argument("--mechanism", default="auto",
                        help="auto (Fourier for all-binary tables, Efron-Stein otherwise), fourier, efron-stein, "
                        "gaussian, binary-encoding, cells, margins or nonneg")
    parser.add_argument("--neighbours", default="add-remove", choices=("add-remove", "replace"),
                        help="neighbouring data sets differ by one added/removed record (default) or one changed record")
    parser.add_argument("--delta", type=float, help="delta, for the gaussian mechanism only, in (0, 1)")
    parser.add_argument("--calibration", default="exact", choices=("exact", "paper"),
                        help="exact sensitivity (default) or the paper's formulas, for reproduction only")
    parser.add_argument("--simulate", action="store_true",
                        help="seeded, reproducible numpy noise instead of the secure sampler (not for publication)")
    parser.add_argument("--seed", type=int, help="seed of the simulation noise (only with --simulate)")
    parser.add_argument("--nonneg-t", type=positive_float, default=None,
                        help="t of the nonneg mechanism: the implied table is non-negative w.p. 1 - exp(-t) (default 5)")
    parser.add_argument("--bound-delta", type=float, default=0.05,
                        help="the audit's L1 error bounds hold with probability 1 - this (default 0.05)")
    parser.add_argument("--out", required=True, help="output folder (must not exist unless --force)")
    parser.add_argument("--force", action="store_true", help="replace an existing output folder")
    parser.add_argument("--ledger", metavar="FILE",
                        help="record the release in this privacy ledger, and refuse it if the table's budget would be exceeded")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .. import __version__
    from ..evaluation import evaluate_release
    from ..mechanisms import DEFAULT_NONNEG_T, plan_release, run_plan
    from ..models import HierarchicalModel, default_model, parse_model
    from ..noise import RELEASE, SIMULATION, noise_source
    from ..reports import check_release_destination, evaluation_warnings, release_warnings, write_release_bundle

    mode = SIMULATION if args.simulate else RELEASE
    if not 0 < args.bound_delta < 1:
        raise TabreleaseError(f"--bound-delta must lie strictly between 0 and 1, not {args.bound_delta:g}")
    if args.seed is not None and not args.simulate:
        raise TabreleaseError(
            "release mode draws from a secure sampler and accepts no seed; add --simulate for seeded, "
            "reproducible (non-secure) noise"
        )
    if args.nonneg_t is not None and args.mechanism != "nonneg":
        raise TabreleaseError("--nonneg-t applies to the nonneg mechanism only")
    check_release_destination(args.out, args.force)
    table = load_from_args(args)
    model = default_model(table) if args.margins is None else parse_model(args.margins, table)
    noise = noise_source(mode, args.seed)
    plan = plan_release(
        table.shape, model.generators, args.epsilon, mechanism=args.mechanism, neighbours=args.neighbours,
        delta=args.delta, calibration=args.calibration, nonneg_t=args.nonneg_t or DEFAULT_NONNEG_T,
    )
    entry = None
    if args.ledger is not None:
        from ..evaluation import margin_label
        from ..ledger import budget_status, charge

        cal = plan.calibration
        # Charged before any noise is drawn; paper calibration is charged at the epsilon it really gives.
        entry = charge(
            args.ledger, table, epsilon=max(cal.epsilon, cal.epsilon_actual), delta=cal.delta,
            mechanism=plan.mechanism, margins=[margin_label(g, table.letters) for g in plan.margins],
            output=str(Path(args.out).resolve()), noise_mode=mode,
        )
    release = run_plan(plan, table.counts, noise)
    refit = HierarchicalModel(release.margins, table.k)
    evaluation = evaluate_release(table, release, refit, bound_delta=args.bound_delta)
    out = write_release_bundle(
        args.out, table, release, evaluation, model_label=refit.names(table.variables), version=__version__,
        force=args.force,
    )
    cal = release.noise
    print(f"released {len(release.margins)} margins of {table.name} with {release.mechanism} "
          f"(epsilon {cal.epsilon:g}{f', delta {cal.delta:g}' if cal.delta else ''}, {cal.neighbours}, "
          f"{cal.distribution} scale {cal.scale:.4g}, {mode} mode)")
    for warning in release_warnings(release) + evaluation_warnings(evaluation):
        print(f"WARNING: {warning}")
    if entry is not None:
        status = budget_status(args.ledger, table)
        left = "no budget set" if status.epsilon_budget is None else f"{status.epsilon_remaining:g} of {status.epsilon_budget:g} remains"
        print(f"ledger:   charged epsilon {entry['epsilon']:g} to {table.name}; spent {status.epsilon_spent:g}, {left}")
    print(f"public:   {out / 'public'}")
    print(f"internal: {out / 'internal' / 'audit.html'}")
    return 0
