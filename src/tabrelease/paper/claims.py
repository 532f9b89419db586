"""What the paper says about its experiment (section 6), and the rules that judge a run against it.

Every verdict is computed: a `Finding` states what the paper says (quoted), what this run computed
under the paper's calibration and under exact calibration, the rule, and the rule's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


def _at(summary, table, calibration, epsilon, column):
    """The summary's value nearest to epsilon, and the epsilon it is at."""
    row = summary[(summary.table == table) & (summary.calibration == calibration)]
    row = row.iloc[(row.epsilon - epsilon).abs().argsort()[:1]]
    return float(row[column].iloc[0]), float(row.epsilon.iloc[0])


def _series(summary, table, calibration, column) -> pd.DataFrame:
    part = summary[(summary.table == table) & (summary.calibration == calibration)].sort_values("epsilon")
    return part[["epsilon", column]]



# --- the comparison with the paper --------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    """One line of the comparison: what the paper says, what this run computed, and the rule's verdict."""

    subject: str
    table: str
    paper_says: str
    run_paper_calibration: str
    run_exact_calibration: str
    rule: str
    verdict: str


# The paper's words (section 6), quoted where a figure's verdict is judged against them.
PAPER_TEXT = {
    "figure1": "when epsilon is very small the sample size becomes unrealistically large, orders of magnitude "
               "larger than the true sample size; even at epsilon = 2 it is highly variable",
    "figure2": "for a wide spectrum of values of epsilon, which provides good privacy guarantees, these "
               "discrepancies are significantly larger than the sample size",
    "figure3": "we see similar patterns in Figure 3 (the difference of the likelihood ratio statistics)",
    "figure4": "this distance gets larger as epsilon gets smaller, with values that are quite high even when epsilon "
               "is large; when epsilon is small the MLE of the perturbed table is at roughly the same distance from "
               "the true MLE as the uniform distribution",
    "figure5": "(Edwards only) a large proportion of the simulations resulted in an infeasible problem",
    "figure6": "(Edwards only) the optimal values of b can be extremely large",
}


def _spearman(frame: pd.DataFrame, column: str) -> float:
    values = frame[column].astype(float)
    if values.nunique() < 2:
        return 0.0
    return float(frame["epsilon"].rank().corr(values.rank()))


def _pair(summary, name, metric, epsilon, fmt="{:.3g}") -> tuple[str, str]:
    out = []
    for calibration in ("paper", "exact"):
        if calibration not in set(summary.calibration):
            out.append("not run")
            continue
        mean, at = _at(summary, name, calibration, epsilon, f"{metric}_mean")
        sd, _ = _at(summary, name, calibration, epsilon, f"{metric}_sd")
        out.append(f"{fmt.format(mean)} (sd {fmt.format(sd)}) at epsilon {at:g}")
    return out[0], out[1]


def _judged(summary, calibration="paper"):
    """The calibration the verdicts are judged on: the paper's (what it plotted) when it was run."""
    return calibration if calibration in set(summary.calibration) else "exact"


def compare_with_paper(
    summary: pd.DataFrame, runs: pd.DataFrame, table7: pd.DataFrame, noise_free: pd.DataFrame
) -> list[Finding]:
    """Where the run agrees with the paper's section 6 and where not. Every number is this run's; each
    verdict applies the rule stated beside it to the runs made with the paper's calibration.

    Parameters
    ----------
    summary : pandas.DataFrame
        Per table, calibration and epsilon (`reproduce.summarise`).
    runs : pandas.DataFrame
        The sweep's rows, one per run.
    table7 : pandas.DataFrame
        As `tables.reproduce_table7` returns it.
    noise_free : pandas.DataFrame
        As `reproduce.noise_free_levels` returns it.

    Returns
    -------
    list of Finding
        Figures 1 to 6 per table, then the calibration (when both were run), Table 7 per table, and the refits.
    """
    findings: list[Finding] = []
    cal = _judged(summary)
    lo, hi = float(summary.epsilon.min()), float(summary.epsilon.max())
    nf = noise_free.set_index("table")
    t7 = table7.set_index("table")
    tables = list(dict.fromkeys(summary.table))
    for name in tables:
        n = int(t7.loc[name, "n"])
        small, at_lo = _at(summary, name, cal, lo, "n_released_mean")
        spread, at_hi = _at(summary, name, cal, hi, "n_released_sd")
        inflated, variable = small >= 10 * n, spread >= 0.05 * n
        p, e = _pair(summary, name, "n_released", lo, "{:.0f}")
        findings.append(Finding(
            "Figure 1", name, PAPER_TEXT["figure1"], f"{p}; n = {n}; sd {spread:.0f} at epsilon {at_hi:g}", e,
            "agrees if mean n' >= 10 n at the smallest epsilon and sd of n' >= 5% of n at the largest",
            ("agrees" if inflated and variable else "disagrees") + f": mean n' is {small / n:.1f} n at epsilon "
            f"{at_lo:g}; sd of n' is {100 * spread / n:.1f}% of n at epsilon {at_hi:g}",
        ))
    for name in tables:
        n = int(t7.loc[name, "n"])
        series = _series(summary, name, cal, "max_l1_error_mean")
        # The largest epsilon up to which every grid point's mean error exceeds n.
        below = series[series.max_l1_error_mean <= n].epsilon
        above = series[series.max_l1_error_mean > n].epsilon
        above = above[above < below.min()] if len(below) else above
        widest = float(above.max()) if len(above) else None
        p, e = _pair(summary, name, "max_l1_error", hi, "{:.1f}")
        verdict = (f"disagrees: the mean error never exceeds n = {n}" if widest is None else
                   ("agrees" if widest >= 0.1 else "disagrees") + f": the mean error exceeds n = {n} for epsilon up "
                   f"to {widest:g}")
        findings.append(Finding("Figure 2", name, PAPER_TEXT["figure2"], p, e,
                                "agrees if the mean max L1 error exceeds n for every epsilon up to at least 0.1",
                                verdict + f"; no noise: {nf.loc[name, 'max_l1_error']:.0f}"))
    for name in tables:
        series = _series(summary, name, cal, "g2_abs_difference_mean")
        rho = _spearman(series, "g2_abs_difference_mean")
        top, at = _at(summary, name, cal, hi, "g2_abs_difference_mean")
        floor = float(nf.loc[name, "g2_abs_difference"])
        p, e = _pair(summary, name, "g2_abs_difference", hi, "{:.1f}")
        findings.append(Finding(
            "Figure 3", name, PAPER_TEXT["figure3"], p, e,
            "agrees if |G2 difference| falls as epsilon grows (Spearman rho < -0.5), as the max L1 error does",
            ("agrees" if rho < -0.5 else "disagrees") + f": rho = {rho:.2f}; at epsilon {at:g} the mean is "
            f"{top:.1f} against {floor:.1f} with no noise at all ({top / floor:.2f} times)" if floor > 0 else
            ("agrees" if rho < -0.5 else "disagrees") + f": rho = {rho:.2f}; no noise gives 0",
        ))
    for name in tables:
        uniform_tool = float(t7.loc[name, "l1_to_uniform_tool"])
        uniform_paper = t7.loc[name, "l1_to_uniform_paper"]
        small, at_lo = _at(summary, name, cal, lo, "mle_l1_mean")
        series = _series(summary, name, cal, "mle_l1_mean")
        rho = _spearman(series, "mle_l1_mean")
        p, e = _pair(summary, name, "mle_l1", lo, "{:.2f}")
        grows = rho < -0.5
        near_uniform = small >= 0.8 * uniform_tool
        uniform_text = (f"original MLE to uniform {uniform_tool:.2f} here, {float(uniform_paper):.2f} printed"
                        + (" (not reproduced by the verified counts)" if abs(uniform_tool - float(uniform_paper)) > 0.02
                           else " (reproduced)")) if pd.notna(uniform_paper) else f"to uniform {uniform_tool:.2f}"
        findings.append(Finding(
            "Figure 4", name, PAPER_TEXT["figure4"], p, e,
            "agrees if the distance falls as epsilon grows (rho < -0.5) and at the smallest epsilon is at least 0.8 "
            "times the original MLE's distance to uniform",
            ("agrees" if grows and near_uniform else "disagrees") + f": rho = {rho:.2f}; {small:.2f} at epsilon "
            f"{at_lo:g}; {uniform_text}; no noise: {nf.loc[name, 'mle_l1']:.3f}. The paper calls this L1 distance "
            "'total variation'; TV is half of it",
        ))
    for name in tables:
        share = float(summary[(summary.table == name) & (summary.calibration == cal)].lp_infeasible_mean.mean())
        p, e = _pair(summary, name, "lp_infeasible", 1.0, "{:.2f}")
        edwards = name == "edwards"
        findings.append(Finding(
            "Figure 5", name, PAPER_TEXT["figure5"] if edwards else "(not shown for this table)", p, e,
            "agrees if b* > 0 in at least half of all runs, over the whole epsilon grid",
            (("agrees" if share >= 0.5 else "disagrees") if edwards else "no claim to check")
            + f": b* > 0 in {100 * share:.0f}% of the runs",
        ))
    for name in tables:
        n = int(t7.loc[name, "n"])
        top, at = _at(summary, name, cal, lo, "lp_b_mean")
        counts = top * float(nf.loc[name, "coefficient_integer_scale"])
        p, e = _pair(summary, name, "lp_b", lo, "{:.3g}")
        edwards = name == "edwards"
        findings.append(Finding(
            "Figure 6", name, PAPER_TEXT["figure6"] if edwards else "(not shown for this table)", p, e,
            "agrees if the mean b* at the smallest epsilon, in counts (times the coefficients' integer scale), "
            "exceeds n",
            (("agrees" if counts > n else "disagrees") if edwards else "no claim to check")
            + f": mean b* {top:.3g} at epsilon {at:g} is {counts:.0f} in counts (n = {n})",
        ))
    findings += _calibration_findings(runs)
    findings += _table7_findings(table7)
    findings.append(_refit_finding(runs))
    return findings


def _calibration_findings(runs: pd.DataFrame) -> list[Finding]:
    out = []
    if not {"paper", "exact"} <= set(runs.calibration):
        return out
    for name in dict.fromkeys(runs.table):
        part = runs[runs.table == name]
        paper = part[part.calibration == "paper"].iloc[0]
        exact = part[part.calibration == "exact"].iloc[0]
        ratio = paper.noise_scale / exact.noise_scale
        holds = bool(paper.epsilon_holds)
        out.append(Finding(
            "Calibration", name, "Table 1 (binary) / Theorem 2 (multi-category) noise scales",
            f"scale x epsilon = {paper.noise_scale * paper.epsilon:.4g}", f"{exact.noise_scale * exact.epsilon:.4g} "
            f"(the exact sensitivity, {exact.neighbours})", "the paper's scale must be at least the exact one",
            (f"epsilon holds, with {ratio:.2f} times the noise it needs" if holds else
             f"epsilon does NOT hold: the paper's runs are {paper.epsilon_actual / paper.epsilon:.2f} x epsilon-DP"),
        ))
    return out


def _table7_findings(table7: pd.DataFrame) -> list[Finding]:
    out = []
    for row in table7.itertuples(index=False):
        cells = int(np.prod([int(k) for k in row.shape.split("x")]))
        free = cells - int(row.df_tool_nominal)
        df_text = (f"df {row.df_tool_nominal} = {cells} cells - {free} free parameters; printed {row.df_paper}"
                   + ("" if row.df_paper == row.df_tool_nominal else
                      f" ({int(row.df_paper) - int(row.df_tool_nominal):+d}: not cells minus free parameters)")
                   + f"; adjusted for zero margins {row.df_tool_adjusted}")
        same_g2 = abs(float(row.g2_tool) - float(row.g2_paper)) <= 0.01
        out.append(Finding(
            "Table 7", row.table, f"G2 {row.g2_paper}, df {row.df_paper}", "(no noise: the original table)",
            f"G2 {row.g2_tool}", "agrees if G2 matches to 0.01 and df equals cells - free parameters",
            ("agrees" if same_g2 and row.df_paper == row.df_tool_nominal else "disagrees")
            + f": G2 {row.g2_tool} vs {row.g2_paper} printed; {df_text}",
        ))
    return out


def _refit_finding(runs: pd.DataFrame) -> Finding:
    refitted = runs.refit_converged.notna()
    stuck = int((runs.refit_converged[refitted] == False).sum())  # noqa: E712  (a column of objects)
    empty = int((~refitted).sum())
    return Finding(
        "Refits", "all", "(the paper does not say)", "", "",
        "every refit must reach the tolerance (generator margins within 1e-8)",
        f"{int(refitted.sum())} of {len(runs)} released tables refitted; "
        + ("all to tolerance" if stuck == 0 else f"{stuck} did NOT converge (their G2 and MLE distances are approximate)")
        + (f"; {empty} released an empty table (n' = 0), which has no MLE" if empty else ""),
    )



FINDING_COLUMNS = ("subject", "table", "paper_says", "run_paper_calibration", "run_exact_calibration", "rule", "verdict")
FINDING_HEADERS = ("", "table", "the paper says", "this run, paper calibration", "this run, exact calibration",
                   "rule", "verdict")


def findings_frame(findings) -> pd.DataFrame:
    """The findings as a table for the report and findings.csv, with headers a reader can follow.

    Parameters
    ----------
    findings : iterable of Finding

    Returns
    -------
    pandas.DataFrame
        One row per finding; columns `FINDING_HEADERS`.
    """
    frame = pd.DataFrame([[getattr(f, c) for c in FINDING_COLUMNS] for f in findings], columns=FINDING_COLUMNS)
    frame.columns = list(FINDING_HEADERS)
    return frame


