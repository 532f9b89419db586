"""The content of a release bundle: `public/` (what may be published) and `internal/` (the audit).

`public/` holds the released margins, one long CSV each, and `release.json` with the release's
parameters. Nothing in it is computed from the confidential table except the DP output itself:
the sensitivity and noise scale depend on the table's shape and the margins, never its counts.
`internal/` holds `audit.json` and `audit.html`, which compare the release with the truth.

The transaction around it (a staging folder beside the target, renamed into place, so that a failure leaves
either the old folder or nothing, never half a release) is the workflow's: `bundle.py`. Importing this module
registers `write_release_contents` as the bundle's report writer; `write_release_bundle` (the bundle's) is
re-exported here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from . import schemas
from .bundle import (RELEASED_TABLE_FILE, ReportWriter, register_report_writer,  # noqa: F401  (re-exported)
                     write_release_bundle)
from .schemas import validate
from .disclosure import disclosure_risk
from .evaluation import (N_OFF_SHARE, ReleaseEvaluation, evaluation_warnings,  # noqa: F401  (re-exported)
                         release_warnings)
from .models import margin_label
from .pipeline import UNFIT_ERROR_SHARE, Release
from .tables import ContingencyTable, people_names, write_long_csv


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def release_parameters(table: ContingencyTable, release: Release, version: str, release_id: str | None = None) -> dict:
    """The public description of a release: parameters only, nothing computed from the counts. `release_id` is the
    random identifier the ledger recorded with the release's charge (absent for a release made without a ledger).

    Parameters
    ----------
    table : ContingencyTable
        Its variables, letters, levels and labels are read, never its counts.
    release : Release
    version : str
        The tool's version.
    release_id : str or None
        The ledger's random release id.

    Returns
    -------
    dict
        JSON-safe (NaN and infinities as None): the document of public/release.json (schema tabrelease/release/1).
    """

    cal = release.noise
    guarantee = release.plan.implementation.guarantee(release.plan, table.variables)
    return _clean(
        {**({"release_id": release_id} if release_id else {}),
            "schema": "tabrelease/release/1",
            "tool": "tabrelease",
            "tool_version": version,
            # No time stamp: the same input, seed and options give byte-identical public files (audit.json's copy
            # of this record says when it was made).
            "mechanism": release.mechanism,
            "estimator": release.estimator,
            "rounding": release.rounding,
            "basis": release.basis,
            "epsilon": cal.epsilon,
            "delta": cal.delta,
            "neighbours": cal.neighbours,
            "privacy": release.privacy,
            "guarantee": guarantee.as_dict(),
            "margins": [
                {"label": margin_label(g, table.letters), "variables": [table.variables[j] for j in g], "file": file}
                for g, file in zip(release.margins, margin_files(table, release.margins,
                                                                 simulated=release.noise_mode != "release"))
            ],
            "variables": [
                {"name": v, "letter": letter, "levels": list(lv), "label": label, "level_labels": list(level_labels)}
                for v, letter, lv, label, level_labels in zip(table.variables, table.letters, table.levels,
                                                              *people_names(table))
            ],
            # The workbook's own labels in the user's language, where a metadata file gives them.
            **({"words": dict(table.metadata["words"])} if (table.metadata or {}).get("words") else {}),
            "noise": {
                "distribution": cal.distribution,
                "scale": cal.scale,
                "sensitivity": cal.sensitivity,
                "sensitivity_norm": "L1" if cal.distribution == "laplace" else "L2",
                "calibration": cal.calibration,
                "epsilon_actual": cal.epsilon_actual,
                "epsilon_holds": cal.epsilon_holds,
                "mode": release.noise_mode,
                "sampler": "OpenDP (secure)" if release.noise_mode == "release" else "numpy Generator (seeded, NOT secure)",
                "coefficients_perturbed": release.coefficients_released,
            },
            "consistent": release.consistent,
            "consistency": release.consistency,
            "parameters": dict(release.parameters),
            "plan": plan_description(release.plan, table),
            "warnings": release_warnings(release),
        }
    )


def plan_description(plan, table: ContingencyTable) -> dict | None:
    """What the plan measured, each block's noise scale and each margin's expected error (before any noise).

    Parameters
    ----------
    plan : MechanismPlan or None
    table : ContingencyTable
        Its variables and letters name the blocks and margins.

    Returns
    -------
    dict or None
        `total` ("public", "exact (replace neighbours)" or "noised"), `blocks` (query, variables, scale) and
        `expected_error` (per margin), and `weighed_inside` where margins asked for inside a released one were
        weighed by the plan; None for a plan without a design (a mechanism that does not plan blocks).
    """
    from .measurements import MARGIN_CELLS

    if plan is None or plan.design is None:
        return None
    design = plan.design
    if plan.parameters.get("total_is_public"):
        total = "public"
    else:
        total = "exact (replace neighbours)" if design.public_total else "noised"
    expected = plan.implementation.expected_errors(plan) or {}
    inside = {"weighed_inside": [[table.variables[j] for j in g] for g in plan.weighed_inside]} \
        if plan.weighed_inside else {}
    return {
        **inside,
        "total": total,
        "blocks": [{"query": "margin" if b.query == MARGIN_CELLS else "residual",
                    "variables": [table.variables[j] for j in b.variables],
                    "scale": plan.block_scale(b.query, b.variables)} for b in design.blocks],
        "expected_error": [{"margin": margin_label(g, table.letters), **e.as_dict()} for g, e in expected.items()],
    }


def at_a_glance(release: Release, evaluation: ReleaseEvaluation | None = None,
                charge: Mapping | None = None) -> list[dict]:
    """What a reviewer must see first, as rows {item, value, flag} ("bad" marks what must be fixed or weighed
    before publishing). Without an evaluation (a release in memory, not yet compared with the truth) the rows
    read only the release: they are public. With one they read the confidential table (the audit's box), and say
    which ledger the release was charged to, or that it was charged to none.

    Parameters
    ----------
    release : Release
    evaluation : ReleaseEvaluation or None
        The release compared with the truth; None: only the release's public rows.
    charge : mapping or None
        With an evaluation: what the audit keeps of the release's charge (`ledger_charge`), None for a release made
        without a ledger.

    Returns
    -------
    list of dict
        Rows with `item`, `value` (text) and `flag` ("ok", "bad" or "").
    """
    cal = release.noise
    rows = [("privacy", release.privacy or "", ""),
            ("mechanism", f"{release.mechanism}, then {release.estimator} and {release.rounding} rounding", "")]
    if release.noise_mode == "release":
        rows.append(("noise", "drawn by OpenDP's secure samplers", "ok"))
    else:
        rows.append(("noise", f"{release.noise_mode} mode (seeded numpy): NOT for publication", "bad"))
    if cal.epsilon_holds:
        # The epsilon asked for, which the noise gives per step of the relation it was calibrated to; the guarantee
        # that holds (twice it for replace neighbours where n is public) is the privacy row's.
        rows.append(("calibration", f"{cal.calibration}: the noise gives the epsilon asked for, {cal.epsilon:g} "
                     "(the guarantee: the privacy row)", "ok"))
    else:
        rows.append(("calibration", f"{cal.calibration}: the epsilon asked for, {cal.epsilon:g}, does NOT hold (the "
                     f"noise gives {cal.epsilon_actual:.4g})", "bad"))
    guarantee = {"global": "global: the released margins are those of one non-negative table",
                 "local": "local only: the released margins agree where they overlap, but are not proved those of one "
                 "non-negative table",
                 "none": "none: the released margins may disagree with each other"}
    rows.append(("consistency", guarantee.get(release.guarantee, str(release.guarantee)),
                 "ok" if release.guarantee == "global" else "bad" if release.guarantee == "none" else ""))
    if evaluation is None:
        rows.append(("released total", f"n' = {_count_text(release.n_released)}", ""))
    else:
        n, n_released = evaluation.n, evaluation.n_released
        off = abs(n_released - n) / n if n else 0.0
        rows.append(("released total",
                     f"n = {n} -> n' = {_count_text(n_released)} ({_percent_change(n_released - n, n)})",
                     "bad" if off > N_OFF_SHARE else "ok"))
        worst = max(evaluation.l1_error_by_margin, key=evaluation.l1_error_by_margin.get)
        share = evaluation.max_l1_error / n if n else float("nan")
        worst = _titles_by_label(release).get(worst, worst)
        rows.append(("worst margin error", f"L1 {evaluation.max_l1_error:.6g} on {worst}: {100 * share:.1f}% of n",
                     "bad" if share > UNFIT_ERROR_SHARE else ""))
        rows.append(_ledger_row(release, charge))
        warnings = len(release_warnings(release)) + len(evaluation_warnings(evaluation, release))
        rows.append(("warnings", f"{warnings} (listed below)" if warnings else "none", "bad" if warnings else "ok"))
    return [{"item": item, "value": value, "flag": flag} for item, value, flag in rows]


def _ledger_row(release: Release, charge: Mapping | None) -> tuple[str, str, str]:
    """The at-a-glance row of the ledger: what was charged to which dataset of which ledger (its record), or that
    nothing was, which a release drawn by the secure sampler must have weighed before it is published."""
    if charge is None:
        return ("ledger", "not charged: made without a ledger, so no budget accounts for it",
                "bad" if release.noise_mode == "release" else "")
    from .privacy import PrivacyGuarantee

    charged = PrivacyGuarantee.from_dict(charge["guarantee"]).describe()
    return ("ledger", f"charged to the dataset {charge['dataset']}: {charged}; in the ledger {charge['ledger']} (id "
                      f"{charge['ledger_id']}), its record {charge['record']}; release id {charge['release_id']}", "ok")


def ledger_charge(charge: Mapping | None) -> dict | None:
    """What the audit keeps of the ledger's record of the charge: the ledger (its path and id), the dataset, the
    record's number, the release id and the guarantee charged; None for a release made without a ledger.

    Parameters
    ----------
    charge : mapping or None
        The ledger's record (`ledger.charge`) with the ledger's path under "ledger", as `publish_release` passes it.

    Returns
    -------
    dict or None
    """
    if charge is None:
        return None
    return {"ledger": str(charge["ledger"]), "ledger_id": charge.get("ledger_id"), "dataset": charge["dataset"],
            "record": charge["sequence"], "release_id": charge["release_id"], "guarantee": charge["guarantee"]}


def _titles_by_label(release: Release) -> dict[str, str]:
    """Each released margin's letter label (the key of an evaluation's dicts and of audit.json) to its title by the
    variables' names for people; empty for a release whose plan has no names (made without a table)."""
    from .models import margin_label
    from .planner import _letters
    from .tables import margin_title

    names = getattr(release.plan, "variable_names", None)
    if names is None:
        return {}
    letters = _letters(len(names))
    return {margin_label(g, letters): margin_title(names, g) for g in release.margins}


def audit_figures(table: ContingencyTable, release: Release, evaluation: ReleaseEvaluation) -> dict:
    """The audit's pictures (inline SVG): every margin's error against the plan, and released against true
    counts for the margins whose error is largest against what the plan expected (up to MAX_MARGIN_FIGURES).

    They read the confidential counts: for the internal audit only.

    Parameters
    ----------
    table : ContingencyTable
        The confidential table.
    release : Release
    evaluation : ReleaseEvaluation

    Returns
    -------
    dict
        `errors` (an `<svg>` element), `margins` (one, or None without margins), `margins_shown` and
        `margins_left_out` (counts of margins).
    """
    from . import figures
    from .models import margin_label
    from .tables import margin_of, margin_titles

    realised = evaluation.l1_error_by_margin
    labels = [margin_label(g, table.letters) for g in release.margins]
    expected = evaluation.expected_l1_by_margin
    quantile = evaluation.expected_l1_quantile_by_margin
    quantile_name = "planned {:g}% bound (a union bound above the quantile)"
    band_from = None
    if evaluation.simulated_errors:  # a true quantile, simulated on the released margins' world, where there is one
        simulated = evaluation.simulated_errors
        quantile, band_from = simulated["quantile_l1_by_margin"], simulated["mean_l1_by_margin"]
        quantile_name = "simulated mean to {:g}% quantile"
    titles = dict(zip(labels, margin_titles(table, release.margins)))

    def by_title(values):  # the figure names each margin by its variables, not by its letters
        return None if values is None else {titles[k]: v for k, v in values.items() if k in titles}

    out = {"errors": figures.errors_against_plan(
        [titles[label] for label in labels], by_title(realised), by_title(expected), by_title(quantile),
        quantile_name.format(100 * (1 - evaluation.bound_delta)), by_title(band_from)),
        "margins": None, "margins_shown": 0, "margins_left_out": 0}
    ranked = sorted(range(len(labels)), key=lambda i: -realised[labels[i]] / max(
        (expected or {}).get(labels[i], 1.0), 1e-12))
    shown = sorted(ranked[:figures.MAX_MARGIN_FIGURES])
    sds = evaluation.expected_cell_sd_by_margin or {}
    names, _ = people_names(table)
    panels = [(" x ".join(names[j] for j in release.margins[i]),
               margin_of(table, release.margins[i]), release.released_margins[i], sds.get(labels[i])) for i in shown]
    out["margins"] = figures.released_against_true(panels) if panels else None
    out["margins_shown"] = len(panels)
    out["margins_left_out"] = len(labels) - len(shown)
    return out


def audit_record(
    table: ContingencyTable, release: Release, evaluation: ReleaseEvaluation, public: Mapping, model_label: str,
    charge: Mapping | None = None,
) -> dict:
    """The internal audit of a release (internal/audit.json): what it did to the confidential table.

    Parameters
    ----------
    table : ContingencyTable
        The confidential table.
    release : Release
    evaluation : ReleaseEvaluation
    public : mapping
        The release's public description (`release_parameters`), held in the audit as it is.
    model_label : str
        The model refitted, in bracket notation.
    charge : mapping or None
        What the audit keeps of the ledger's charge (`ledger_charge`); None: made without a ledger.

    Returns
    -------
    dict
        JSON-safe (NaN and infinities as None); schema tabrelease/audit/1.
    """
    return _clean(
        {
            "schema": "tabrelease/audit/1",
            "at_a_glance": at_a_glance(release, evaluation, charge),
            "ledger_charge": None if charge is None else dict(charge),
            "release": {**public, "created": datetime.now(timezone.utc).isoformat(timespec="seconds")},
            "table": {"name": table.name, "shape": list(table.shape), "n": table.n, "cells": table.cells,
                      "zero_cells": table.zero_cells},
            "model_refitted": model_label,
            "lp": None if release.lp is None else {
                "b_star": release.lp.b, "infeasible": release.lp.infeasible, "status": release.lp.status,
                "seconds": release.lp.seconds,
            },
            "evaluation": evaluation.as_dict(),
            "disclosure_risk": disclosure_risk(table, release),
            "calibration_check": release.noise.as_dict(),
            # The seed that replays a simulated release (`--simulate --seed`); secure noise has none.
            "noise_seed": release.noise_seed,
            "timings_seconds": dict(release.timings),
            "rounding_gap": release.rounding_gap,
            "released_table": released_table_record(table, release),
            "notes": list(release.notes) + evaluation_warnings(evaluation, release),
        }
    )




def released_table_record(table, release) -> dict:
    """Where the released table is (internal/released_table.csv), or why there is none.

    Parameters
    ----------
    table : ContingencyTable
        The table released (its shape and cell count are read, not its counts).
    release : Release

    Returns
    -------
    dict
        ``file`` (the file's name in internal/, or None) and ``note`` (why there is no file, or None).
    """
    if release.table is not None:
        return {"file": RELEASED_TABLE_FILE, "note": None}
    estimator = release.estimator or "the mechanism's estimator"
    return {"file": None, "note": f"no released table: the estimate ({estimator}) is of the released margins only, "
                                  f"without the {table.cells:,} cells of the full table, so no table of cells was "
                                  "released (the margins agree where they overlap)"}


# A simulated release's margin files say so in their names (``Sexe.simulation.csv``): its noise is seeded, not
# secure, and a file copied out of the bundle had carried no sign of it (a new user's trial).
SIMULATION_EXTENSION = ".simulation.csv"


def margin_files(table, margins, *, simulated: bool = False) -> list[str]:
    """Published file names people can read: the variables' names for people joined by "__"
    (``Région de résidence__Sexe.csv``), kept as they are but for what a file system forbids, and distinct
    (`_files.published_file_names`); a simulated release's end in `SIMULATION_EXTENSION`.

    Parameters
    ----------
    table : ContingencyTable
        Its variables' names (or labels for people) are read.
    margins : sequence of tuple of int
        The released margins, as axis tuples.
    simulated : bool, default False
        Whether the release's noise was simulation mode's.

    Returns
    -------
    list of str
        One file name per margin, in order.
    """
    from ._files import published_file_names

    names, _ = people_names(table)
    return published_file_names([[names[j] for j in g] for g in margins],
                                extension=SIMULATION_EXTENSION if simulated else ".csv")


def write_release_contents(
    public_dir: Path,
    internal_dir: Path,
    table: ContingencyTable,
    release: Release,
    evaluation: ReleaseEvaluation,
    *,
    version: str,
    workbook: bool = False,
    charge: Mapping | None = None,
    out_sep: str = ",",
    out_bom: bool = False,
) -> None:
    """The report content of a bundle, into its staged `public/` and `internal/` folders (`bundle.write_bundle`
    makes them, and publishes them atomically). With `workbook`, public/ also holds the margins as one .xlsx
    workbook (its CSV files' values as cross-tabs with totals, release.json's description, and the plan's margins of error); the charge's random release id goes into
    public/release.json.

    Parameters
    ----------
    public_dir, internal_dir : Path
        The staged folders (existing, empty).
    table : ContingencyTable
        The confidential table (only internal/ reads its counts).
    release : Release
    evaluation : ReleaseEvaluation
        The release compared with the truth (its refit is of the model the released margins generate).
    version : str
        The tool's version.
    workbook : bool
        Also write public/margins.xlsx (needs openpyxl: `check_report_support` checks it before the charge).
    charge : mapping or None
        The ledger's record of the charge, with the ledger's path under "ledger" (its `release_id` is published; the
        audit keeps `ledger_charge` of it); None: made without a ledger.
    out_sep : str
        The public CSV files' field separator: one of ``, ; |`` or a tab.
    out_bom : bool
        Start the public CSV files with a UTF-8 byte-order mark.

    Raises
    ------
    TabreleaseError
        A document does not match its schema (a fault of the tool, reported as internal).
    """
    public = release_parameters(table, release, version, None if charge is None else charge.get("release_id"))
    if workbook:
        from .workbook import WORKBOOK_FILE

        public["workbook"] = WORKBOOK_FILE
    if (out_sep, out_bom) != (",", False):
        # Said in release.json only when it differs from the default, so that a default release is unchanged.
        public["csv"] = {"separator": out_sep, "bom": out_bom}
    # The schema is the allow-list of public/: nothing it does not name is written.
    validate(public, schemas.RELEASE)
    for spec, g, values in zip(public["margins"], release.margins, release.released_margins):
        write_long_csv(public_dir / spec["file"], *people_names(table), g, values, sep=out_sep, bom=out_bom)
    (public_dir / "release.json").write_text(json.dumps(public, indent=2) + "\n")
    if workbook:
        from .workbook import write_workbook

        # The values of the CSV files just written, labelled from release.json (a workbook cell is written as
        # text, so labels need no protective quote against formulas); the margins of error are the plan's, from
        # the noise scales and the estimator's linear error model alone (publishable: no count is read).
        plan = release.plan
        planned = (plan.implementation.expected_errors(plan) if plan is not None else None) or {}
        write_workbook(public_dir / public["workbook"], public, list(release.released_margins),
                       [planned.get(g) for g in release.margins])
    from .models import HierarchicalModel

    from .tables import margin_title

    names, _ = people_names(table)
    # The model refitted, by the variables' names for people (not letters, which depend on the variables read).
    model_label = "".join(margin_title(names, g) for g in HierarchicalModel(release.margins, table.k).generators)
    audit = audit_record(table, release, evaluation, public, model_label, ledger_charge(charge))
    validate(audit, schemas.AUDIT)
    (internal_dir / "audit.json").write_text(json.dumps(audit, indent=2) + "\n")
    if release.table is not None:
        # w', the table whose margins were released (itself a post-processed DP output): counts where it was rounded,
        # else the fit's values whole, so that the audit is recomputable from the file (`error_model.audit_seed`).
        write_long_csv(internal_dir / RELEASED_TABLE_FILE, table.variables, table.levels, tuple(range(table.k)),
                       release.table, digits=None)
    (internal_dir / "audit.html").write_text(render_audit_html(audit, audit_figures(table, release, evaluation)))


def check_report_support(workbook: bool = False, margin_shapes=()) -> None:
    """Refuse, before the charge, report content this installation cannot write (a workbook without openpyxl) or
    Excel cannot hold (a margin's sheet past its rows or columns).

    Parameters
    ----------
    workbook : bool
        The release asks for an .xlsx workbook.
    margin_shapes : sequence of sequence of int
        The released margins' shapes, where the plan is known (none before it).

    Raises
    ------
    TabreleaseError
        `workbook` without openpyxl installed, or with a margin too large for a sheet.
    """
    if workbook:
        from .workbook import check_workbook_fits, check_workbook_support

        check_workbook_support()
        check_workbook_fits(margin_shapes)


# The workflow writes a bundle's content through this hook (it imports no presentation module).
register_report_writer(ReportWriter(write=write_release_contents, check=check_report_support))


# The look every page the tool writes shares (the audit, the reproduction's report): one column of text at a
# readable width, ruled tables with a shaded header, figures at their own width (never stretched), warnings boxed.
PAGE_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222;
       line-height: 1.4; }
figure { margin: 0.5rem 0 1rem; } figure svg, figure img { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 0.95rem; color: #444; margin-top: 0.3rem; }
table { max-width: 100%; border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
td, th { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } .warn { background: #fff3cd; border: 1px solid #e0c36a; padding: 0.6rem; margin: 0.6rem 0; }
.ok { color: #1b6e20; } .bad { color: #a61b1b; font-weight: bold; } code { background: #f5f5f5; padding: 0 0.2rem; }
.scroll { overflow-x: auto; max-width: 100%; }
"""

_AUDIT_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tabrelease audit: {name}</title>
<style>""" + PAGE_STYLE + """
.glance { border: 2px solid #2166ac; border-radius: 6px; padding: 0.4rem 1rem; margin: 1rem 0; }
.glance table { margin: 0.3rem 0; } .glance td, .glance th { border: none; border-bottom: 1px solid #e3e3e3; }
td { overflow-wrap: anywhere; }
</style></head><body>
<h1>Release audit — {name}</h1>
<p><strong>Internal: this page describes the confidential table. Do not publish it.</strong></p>
"""


def _percent_change(change: float, base: float) -> str:
    """`change` as a signed percentage of `base`: one decimal, or two significant figures where one decimal would
    read a change as 0 ("-0.0%" for 4526 -> 4524); "+0%" for none."""
    if change == 0:
        return "+0%"
    percent = 100 * change / max(base, 1)
    if abs(percent) >= 0.05:
        return f"{percent:+.1f}%"
    # Two significant figures, written out (never in powers of ten: "+1e-06%" for a change of 1 in 10^8).
    return np.format_float_positional(percent, precision=2, unique=False, fractional=False, trim="-", sign=True) + "%"


def _count_text(value: float) -> str:
    """A number of people as a person reads it: whole, or to one decimal (never in powers of ten)."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _text(value) -> str:
    """A value as page text, escaped."""
    from markupsafe import escape

    return str(escape(str(value)))


def _audit_page(a: Mapping, figures: Mapping, people: Mapping, titles: Mapping) -> str:
    """The audit page's HTML (every value escaped; the figures are SVG the tool drew)."""
    t = _text
    release, e, d = a["release"], a["evaluation"], a["disclosure_risk"]
    out = [_AUDIT_HEAD.replace("{name}", t(a["table"]["name"]))]
    out.append('<div class="glance"><h2>At a glance</h2><table>\n')
    for r in a["at_a_glance"]:
        flag = f' class="{t(r["flag"])}"' if r["flag"] else ""
        out.append(f'<tr><th>{t(r["item"])}</th><td{flag}>{t(r["value"])}</td></tr>\n')
    out.append("</table></div>\n")
    out += [f'<div class="warn">{t(w)}</div>' for w in release["warnings"]]
    out += [f'<div class="warn">{t(n)}</div>' for n in a["notes"] if n not in release["warnings"]]
    basis = f' ({t(release["basis"])} basis)' if release.get("basis") else ""
    noise = release["noise"]
    noise_text = (f'{t(noise["distribution"])}, planned per block (below); ' if release.get("plan")
                  else f'{t(noise["distribution"])}, scale {noise["scale"]:.6g}, ')
    margins = "".join(f"<code>{t(titles[m['label']])}</code> " for m in release["margins"])
    made = t(release.get("created", "(no time recorded)"))  # audit.json's copy of the record has it
    out.append(f"""
<h2>Release</h2>
<table>
<tr><th>mechanism</th><td>{t(release["mechanism"])}{basis}</td></tr>
<tr><th>privacy</th><td>{t(release["privacy"])}</td></tr>
<tr><th>margins</th><td>{margins}</td></tr>
<tr><th>noise</th><td>{noise_text}{t(noise["sampler"])}</td></tr>
<tr><th>made</th><td>{made} by tabrelease {t(release["tool_version"])}</td></tr>
</table>
""")
    if release.get("plan"):
        plan = release["plan"]
        out.append(f"""<h2>What was measured (the plan)</h2>
<p>Total: {t(plan["total"])}. Margin blocks have their scale in counts; residual blocks (Fourier or Efron–Stein \
coefficients) in coefficient units.</p>
<table><tr><th>block</th><th>variables</th><th>noise scale</th></tr>
""")
        for b in plan["blocks"]:
            variables = ", ".join(t(people.get(v, v)) for v in b["variables"])
            out.append(f"<tr><td>{t(b['query'])}</td><td>{variables}</td><td>{b['scale']:.6g}</td></tr>\n")
        out.append("</table>")
    check = a["calibration_check"]
    holds = ('<span class="ok">stated &epsilon; holds</span>' if check["epsilon_holds"]
             else '<span class="bad">stated &epsilon; does NOT hold</span>')
    out.append(f"""
<h2>Calibration check</h2>
<table>
<tr><th>exact {t(check["sensitivity_norm"])} sensitivity</th><td>{check["sensitivity"]:.6g}</td></tr>
<tr><th>calibration</th><td>{t(check["calibration"])}</td></tr>
<tr><th>&epsilon; given by the noise</th><td>{check["epsilon_actual"]:.6g}
 {holds}</td></tr>
</table>
<h2>What the release did</h2>
""")
    n, n_released = e["n"], e["n_released"]
    direction = "over" if n_released >= n else "under"
    released, off = _count_text(n_released), _count_text(abs(n_released - n))
    stated = ("so the release states the population's size exactly" if n_released == n else
              f"so the release states the population's size {direction} by {off} "
              f"({_percent_change(abs(n_released - n), n).lstrip('+')})")  # as the at-a-glance box says it
    out.append(f"""<table>
<tr><th>sample size n → n'</th><td>{t(n)} → {released}: the released margins sum to {released} people \
where the table has {t(n)}, {stated}.</td></tr>
""")
    if a.get("lp"):
        lp = a["lp"]
        feasible = ("(no non-negative table has the noisy coefficients)" if lp["infeasible"] else "(feasible)")
        out.append(f"""<tr><th>LP b*</th><td>{lp["b_star"]:.6g} {feasible}; {1000 * lp["seconds"]:.1f} ms. The \
consistency LP found the non-negative table whose coefficients are closest to the noisy ones in the largest single \
difference; b* is that difference: 0 would mean the noisy coefficients were already those of a non-negative table, \
and the larger it is, the more the noise had to be corrected before any table could be released.</td></tr>""")
    released = a.get("released_table")
    if released and released.get("file"):
        released_text = (f"<code>internal/{t(released['file'])}</code>: the rounded table whose margins were "
                         "released")
    else:
        released_text = t(released["note"]) if released else ""
    out.append(f"""
<tr><th>released table</th><td>{released_text}</td></tr>
<tr><th>max L1 error of a released margin</th><td>{e["max_l1_error"]:.6g}</td></tr>
<tr><th>model refitted</th><td><code>{t(a["model_refitted"])}</code></td></tr>
""")
    if e.get("refit_note"):
        out.append(f"<tr><th>refit</th><td>{t(e['refit_note'])}</td></tr>")
    else:
        out.append(f"<tr><th>G² original</th><td>{e['g2_original']:.4f} (df {t(e['df_original'])} nominal, "
                   f"{t(e['df_adjusted_original'])} adjusted)</td></tr>")
    # Why a figure is not defined: an empty release (total 0) has a table and consistent margins, and no fit.
    empty = "not defined: the release is empty (its total is 0), and no model is fitted to it"
    g2 = (f"{e['g2_released']:.4f} (difference {e['g2_difference']:+.4f})" if e["g2_released"] is not None
          else empty if e["n_released"] == 0 else "not defined: no released table")
    mle = (f"L1 {e['mle_l1']:.4f}, total variation {e['mle_total_variation']:.4f}" if e["mle_l1"] is not None
           else empty if e["n_released"] == 0
           else "not defined: the released margins are inconsistent" if not a.get("release", {}).get("consistent", True)
           else "not defined: no fit to the released margins (a released count is negative, or the refit failed)")
    out.append(f"""
<tr><th>G² released</th><td>{g2}</td></tr>
<tr><th>MLE distance, original vs released</th><td>{mle}</td></tr>
</table>
<h2>Per margin</h2>
""")
    if figures["errors"]:
        out.append(f"<figure>{figures['errors']}</figure>")
    sim = e["simulated_errors"]
    header = "<table><tr><th>margin</th><th>L1 error</th>"
    if sim:
        header += f"<th>simulated mean L1</th><th>simulated {100 * sim['level']:g}% quantile</th>"
    header += (f"<th>planned expected L1 (unbiased)</th><th>planned {100 * (1 - e['bound_delta']):g}% bound (a union "
               "bound above the quantile, not a quantile)</th>")
    if e.get("paper_bound_by_margin"):
        header += f"<th>paper's Theorem 1/3 at &delta; = {t(e['bound_delta'])}</th>"
    out.append(header + "</tr>\n")
    exceeded = ' <span class="bad">exceeded</span>'
    expected, quantile = e.get("expected_l1_by_margin"), e.get("expected_l1_quantile_by_margin")
    for label, err in e["l1_error_by_margin"].items():
        row = f"<tr><td><code>{t(titles.get(label, label))}</code></td><td>{err:.6g}</td>"
        if sim:
            q = sim["quantile_l1_by_margin"][label]
            row += (f"<td>{sim['mean_l1_by_margin'][label]:.4g}</td>"
                    f"<td>{q:.4g}{exceeded if err > q else ''}</td>")
        row += f"<td>{f'{expected[label]:.4g}' if expected else '—'}</td>"
        row += (f"<td>{quantile[label]:.4g}{exceeded if err > quantile[label] else ''}</td>" if quantile
                else "<td>—</td>")
        if e.get("paper_bound_by_margin"):
            row += f"<td>{e['paper_bound_by_margin'][label]:.6g}</td>"
        out.append(row + "</tr>\n")
    out.append("</table>\n<p>")
    if sim:
        from .error_model import (AUDIT_RUNS, BATCHES_ADDED, BATCHES_LIMITED, FIRST_BATCH_KEPT, MAX_BATCHES,
                                  MEAN_RELATIVE_SE, ROUNDED_LIKE, SEEDED_FROM_THE_RELEASE, TOTAL_CONDITIONED,
                                  TOTAL_PUBLIC, SHRUNK_TOWARD_LOWER_ORDER, TOTAL_RUNS, TOTAL_UNCERTAIN,
                                  TOTALS_REFLECTED, TOWARD_THE_RELEASE, CORRECTED_FOR_THE_FITS_BIAS)

        order = ""
        if sim.get("order_statistic"):
            k, runs = sim["order_statistic"], sim["runs"]
            order = (f" (order statistic {t(k)} of {t(runs)}: a further release's error is at most it with "
                     f"probability {t(k)}/{t(runs + 1)}; not a bound)")
        # The reference's parts on the total and the batches are explained in paragraphs of their own below.
        world = sim["reference"]
        seeded = ("seeded from the released margins" if SEEDED_FROM_THE_RELEASE in sim["reference"]
                  else "with fixed seeds")  # an audit written before its seeds came from the release
        # How the runs stand in for the release's rounding, from the reference (an audit written before stop 50
        # did not round them).
        stand_in = [text for text in ROUNDED_LIKE.values() if text in sim["reference"]]
        rounding = (stand_in[0].lstrip("; ") if stand_in else
                    "rounding, which keeps each cell within 1 of the fit, is not simulated")
        for part in (SEEDED_FROM_THE_RELEASE, TOTAL_CONDITIONED, TOTAL_PUBLIC, TOTALS_REFLECTED, BATCHES_ADDED,
                     *ROUNDED_LIKE.values()):
            world = world.replace(part, "")
        limited = re.search(re.escape(BATCHES_LIMITED).replace(r"\{count\}", r"(\d+)")
                            .replace(r"\{wanted\}", r"(\d+)") + f"({re.escape(FIRST_BATCH_KEPT)})?", world)
        if limited:
            world = world.replace(limited.group(0), "")
        uncertain = re.search(re.escape(TOTAL_UNCERTAIN).replace(r"\{total\}", r"(?P<total>\S+)")
                              .replace(r"\{z\}", r"(?P<z>\S+)").replace(r"\{sd\}", r"(?P<sd>[^)\s]+)")
                              .replace(r"\{level\}", r"(?P<level>\S+?)") + "$", world)
        if uncertain:
            world = world[:uncertain.start()]
        corrected = re.search(re.escape(CORRECTED_FOR_THE_FITS_BIAS).replace(r"\{rounds\}", r"(?P<rounds>\d+)")
                              .replace(r"\{releases\}", r"(?P<releases>\d+)") + "$", world)
        if corrected:  # the world's margins were corrected for the fit's bias (`corrected_for_the_fits_bias`)
            world = world[:corrected.start()]
        world, _, share = world.partition(TOWARD_THE_RELEASE)  # the share, where the world was moved
        world, _, keep = world.partition(SHRUNK_TOWARD_LOWER_ORDER)  # the share kept, where the margins were shrunk
        moved = bool(share) and float(share) > 0
        if keep:
            world += f", the released table first shrunk toward its lower-order fit, keeping the share {keep} (below)"
        if moved:
            world += f", moved toward the released table by the share {share} (below)"
        out.append(f"<strong>The simulated error</strong> is the mean and the {100 * sim['level']:g}% quantile of each "
                   f"margin's L1 error over {t(sim['runs'])} simulated releases by the same plan{order}, of "
                   f"{t(world)}. They take non-negativity into account and read nothing confidential. "
                   f"</p>\n<p>The runs use the same noise scales and estimator, {seeded}; {rounding}. They are "
                   "post-processing of the release: "
                   "the released table, <code>internal/released_table.csv</code> (its margins, and its cells where "
                   "the world is moved toward it; read it with its levels in the order of "
                   "<code>public/release.json</code>), with the plan in <code>public/release.json</code>. "
                   "The world they are simulated on is the table of greatest entropy with the released margins "
                   "(fitted by IPF), rounded at random to counts, seeded so too: what the released table holds "
                   "beyond its margins is, where the noise is large, mostly the fit's allocation of noise. ")
        if keep:
            # A least-squares release: its margins were shrunk before the world was built (`shrunk_toward_lower_order`).
            out.append("Before that, the released table is shrunk toward the fit of its margins' own sub-margins "
                       "(the table of greatest entropy with the margins one variable smaller), keeping the share "
                       f"{t(keep)} of its margins' departure from that fit: the share that releases of the fit itself "
                       "do not make by noise alone (the positive-part James-Stein share; 1 keeps the released "
                       "margins, 0 takes the fit). Margins that carry their noise would make the world sparser or "
                       "smoother than the truth where the truth is not. The released margins and table the world is "
                       "built on below are the shrunk ones. ")
        if share:
            # The plan put noise on every cell: the released cells were weighed against it (`_toward_the_release`).
            out.append("The plan put noise on every cell, so the released table's cells say more of the table than "
                       "its margins, the more so the smaller the noise is against the table: the world "
                       + (f"is moved toward the released table, before its rounding, by the share {t(share)}"
                          if moved else "would be moved toward the released table by the share")
                       + " of the released table's departure from the smoothest table that the noise does not explain "
                       "(the positive-part James-Stein share: 1 less the noise's variance per cell times the "
                       "dimensions the departure has, over its sum of squares; 0 leaves the smoothest table, 1 would "
                       "take the released table itself)"
                       + ("" if moved else ", and here the noise explains all of it (the share is 0)")
                       + ". A smooth world has no empty cells where a sparse truth has many, and a non-negative fit "
                       "errs differently on empty cells. ")
        if corrected:
            out.append(f"Last, in {t(int(corrected['rounds']))} rounds, {t(int(corrected['releases']))} releases of "
                       "the world are drawn and each of its margins is moved by the released margin less their mean "
                       "margin (cells below 0 set to 0, scaled back to the released total), then the world fitted to "
                       "the moved margins (by IPF, from itself) and scaled back to that total: a non-negative fit "
                       "biases an empty or small cell up and a dense one down, so the released margins are flatter "
                       "than the truth's, and the correction moves the world toward one whose own releases come out, "
                       "on average, as the release did. Its margins are then not quite the released ones. ")
        out.append("They describe a table like that world" + (
            ", less smooth than the table of greatest entropy by that share" if moved else
            ", the smoothest table with the released margins (which carry this release's noise, and the world's "
            "rounding besides)") + (", its margins then corrected as said" if corrected else "")
            + ", not the truth.</p>\n<p>")
        if TOTAL_CONDITIONED in sim["reference"]:
            out.append("Each run's world has a total the truth's may have had, given this release's total: the "
                       "released total is noisy, and where the noise is large against the table it decides most of "
                       "the error, so a world with the released total alone would state too little where that total "
                       "came out low, and too much where it came out high. Each run draws its noise first, takes its "
                       "own noise in the total (the total its fit pins, the best linear unbiased estimate from the "
                       "noisy measurements, less its world's), and releases the world (before its rounding) scaled "
                       "to the released total less that noise, or to 0 where that is negative, "
                       "rounded at random afresh: every run whose world is not clamped at 0 releases about this "
                       "release's total (the least-squares fit pins its total to that estimate). Its error is taken "
                       "against its own margins.</p>\n<p>")
        if TOTAL_PUBLIC in sim["reference"]:
            out.append("The total is public: the release gives it exactly, so every run's world has it, and the "
                       "runs differ only in their noise and their world's rounding.</p>\n<p>")
        if uncertain:
            out.append(f"<strong class=\"bad\">Here the release barely tells its total</strong>: the released "
                       f"total {t(uncertain['total'])} is within {t(uncertain['z'])} standard deviations of 0 (the "
                       f"noise in it has standard deviation {t(uncertain['sd'])}), so a {t(uncertain['level'])}% "
                       "interval for the total reaches 0. The runs' totals are then little more than draws of that "
                       "noise, and the simulated error is that of the totals the release allows: it can be far from "
                       "the error at the true total. Read it as a rough guide only.</p>\n<p>")
            if float(uncertain["total"]) == 0:
                # Every released cell is 0, so each margin's L1 error is the truth's total, whatever the noise was;
                # the released total is 0 and the fitted one cannot be negative, so n - 0 is below z sd about as
                # often as the level says (the same interval, its upper end).
                out.append("<strong class=\"bad\">This release is empty</strong>: every released cell is 0, so each "
                           "margin's L1 error is exactly the table's total, which the release does not tell; by the "
                           f"same interval it is at most about {t(uncertain['z'])} × {t(uncertain['sd'])} = "
                           f"{t(format(float(uncertain['z']) * float(uncertain['sd']), '.3g'))}. The "
                           "simulated figures above are those of releases of an empty world, not of this table."
                           "</p>\n<p>")
        # Audits of estimators other than least squares, and those written before 75c92d6, reflect it instead.
        if TOTALS_REFLECTED in sim["reference"]:  # and one written before the total was varied says nothing of it
            out.append("The world's total is varied from run to run because the released total is noisy too, and "
                       "where the noise is large against the table it decides most of the error: a world with the "
                       "released total alone states too little where that total came out low, and too much where it "
                       "came out high. Each run's world is that world (before its rounding) scaled to twice its "
                       "total less the released total of one of "
                       f"{t(TOTAL_RUNS)} releases of the world, or to 0 where that is negative (the basic bootstrap), "
                       "rounded at random afresh; its error is taken against its own margins.</p>\n<p>")
        if BATCHES_ADDED in sim["reference"]:  # nor does one written before the runs came in batches
            out.append(f"The runs come in batches of {t(AUDIT_RUNS)}, each with its own seeds. A first batch says "
                       "how many batches would make the runs' mean error (each run's mean over the margins) known to "
                       f"{100 * MEAN_RELATIVE_SE:g}% of itself (its standard error"
                       + (", the runs sharing a released total taken together" if TOTALS_REFLECTED in sim["reference"]
                          else "")
                       + f"), at most {t(MAX_BATCHES)} and within a limit on the fits' work (counted in cells "
                       "fitted by least squares); where that "
                       "is more than one, the figures are those of that many further batches, the first left out (a "
                       "number chosen from it would lean the mean its way). On a small table at small epsilon one "
                       "batch's mean is not that precise."
                       + (f" Here the limit on the work allowed {t(limited.group(1))} of the {t(limited.group(2))} "
                          "batches the first asked for, so the mean is known less precisely than that"
                          + (", and the figures are the first batch's own" if limited.group(3) else "") + "."
                          if limited else "") + "</p>\n<p>")
    elif e.get("simulation_note"):
        out.append(f"{t(e['simulation_note'])}. ")
    level = f"{100 * (1 - e['bound_delta']):g}"
    out.append("The planned expected L1 error is the plan's, computed before the noise was drawn: that of the "
               "unbiased linear reconstruction of the measurements (before non-negativity, the estimator and "
               "rounding, which can reduce it: the table sets this release's realised error beside it), under a "
               "normal approximation. The planned bound is a union "
               f"bound above the {level}% quantile of that error, not a quantile: each cell within its z-score, a "
               "union over the margin's cells. ")
    if e.get("paper_bound_by_margin"):
        out.append("The paper's bound is stated for the paper's noise scale; it is shown for comparison, whatever "
                   "the calibration.")
    if e.get("l1_bound_by_margin"):
        out.append(" A looser bound derived here for the LP (a union bound over every coefficient) is kept in "
                   "audit.json.")
    out.append("</p>\n")
    if figures["margins"]:
        band = (", and the blue band is each cell's planned 95% range" if e.get("expected_cell_sd_by_margin") else "")
        shown = (f" Shown: the {t(figures['margins_shown'])} margins whose error is largest against the plan; "
                 f"{t(figures['margins_left_out'])} more are in the table above." if figures["margins_left_out"]
                 else "")
        out.append(f"<h3>Released against true counts</h3>\n<p>Each point is a cell of the margin; on the grey line "
                   f"the release is exact{band}.{shown}</p>\n<figure>{figures['margins']}</figure>")
    small = t(d["small_count"])
    heads = ("margin", "cells", "true 1s", "true 2s", "smallest non-zero", "released small", "… true 0",
             f"… true 1–{small}", "… equal to truth", "true small released as 0")
    out.append(f"""
<h2>Disclosure risk (classical view)</h2>
<p>What a plain, non-private release of these margins would have shown, and the released margins' small cells (1 to \
{small}).</p>
<table><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr>
""")

    def smallest(r):
        return t(r["smallest_nonzero"]) if r["smallest_nonzero"] is not None else "—"

    def released_cells(r):
        return "".join(f"<td>{t(r[key])}</td>" for key in ("released_small", "released_small_true_zero",
                                                          "released_small_true_small", "released_small_true_exact",
                                                          "true_small_released_zero"))

    for label, r in d["margins"].items():
        out.append(f"<tr><td><code>{t(titles.get(label, label))}</code></td><td>{t(r['cells'])}</td>"
                   f"<td>{t(r['true_count_1'])}</td><td>{t(r['true_count_2'])}</td><td>{smallest(r)}</td>\n"
                   f"{released_cells(r)}</tr>\n")
    r = d["full_table"]
    if r["true_count_1"] is None:
        counted = ('<td colspan="3">not counted (the table was counted from its file as margins; --engine pandas '
                   "holds its records)</td>")
    else:
        counted = f"<td>{t(r['true_count_1'])}</td><td>{t(r['true_count_2'])}</td><td>{smallest(r)}</td>"
    after = released_cells(r) if "released_small" in r else '<td colspan="5">no released table</td>'
    out.append(f"<tr><td>full table</td><td>{t(r['cells'])}</td>{counted}\n{after}</tr>\n</table>\n")
    if e.get("bound_source"):
        out.append(f"<p>Bound: {t(e['bound_source'])}.</p>")
    out.append("\n</body></html>\n")
    return "".join(out)


def render_audit_html(audit: Mapping, figures: Mapping | None = None) -> str:
    """The audit as one self-contained HTML page (internal/audit.html; internal: it describes the confidential table).

    Parameters
    ----------
    audit : mapping
        As `audit_record` returns it.
    figures : mapping or None
        As `audit_figures` returns it; None: a page without pictures.

    Returns
    -------
    str
        The HTML page (values escaped).
    """
    from .tables import margin_title

    figures = figures or {"errors": None, "margins": None, "margins_shown": 0, "margins_left_out": 0}
    # A person reads margins by their variables' names for people (audit.json keys them by letters, which depend on
    # the variables a table was read with).
    people = {v["name"]: v.get("label") or v["name"] for v in audit["release"].get("variables", [])}
    titles = {m["label"]: margin_title([people.get(v, v) for v in m["variables"]], range(len(m["variables"])))
              for m in audit["release"]["margins"]}
    return _audit_page(audit, figures, people, titles)
