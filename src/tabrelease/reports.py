"""Writing a release: `public/` (what may be published) and `internal/` (the audit), atomically.

`public/` holds the released margins, one long CSV each, and `release.json` with the release's
parameters. Nothing in it is computed from the confidential table except the DP output itself:
the sensitivity and noise scale depend on the table's shape and the margins, never its counts.
`internal/` holds `audit.json` and `audit.html`, which compare the release with the truth.

The bundle is built in a temporary folder beside the target and renamed into place, so a
failure leaves either the old folder or nothing, never half a release.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from . import schemas
from ._files import foreign_entries, process_alive
from .schemas import validate
from .errors import TabreleaseError
from .disclosure import disclosure_risk
from .evaluation import ReleaseEvaluation
from .models import margin_label
from .pipeline import UNFIT_ERROR_SHARE, Release
from .tables import ContingencyTable, long_rows, people_names, write_long_csv


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
    random identifier the ledger recorded with the release's charge (absent for a release made without a ledger)."""
    from .mechanisms import mechanism_of

    cal = release.noise
    guarantee = mechanism_of(release.plan).guarantee(release.plan, table.variables)
    return _clean(
        {**({"release_id": release_id} if release_id else {}),
            "schema": "tabrelease/release/1",
            "tool": "tabrelease",
            "tool_version": version,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
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
                for g, file in zip(release.margins, margin_files(table, release.margins))
            ],
            "variables": [
                {"name": v, "letter": letter, "levels": list(lv), "label": label, "level_labels": list(level_labels)}
                for v, letter, lv, label, level_labels in zip(table.variables, table.letters, table.levels,
                                                              *people_names(table))
            ],
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
    """What the plan measured, each block's noise scale and each margin's expected error (before any noise)."""
    from .mechanisms import mechanism_of
    from .measurements import MARGIN_CELLS

    if plan is None or plan.design is None:
        return None
    design = plan.design
    if plan.parameters.get("total_is_public"):
        total = "public"
    else:
        total = "exact (replace neighbours)" if design.public_total else "noised"
    expected = mechanism_of(plan).expected_errors(plan) or {}
    return {
        "total": total,
        "blocks": [{"query": "margin" if b.query == MARGIN_CELLS else "residual",
                    "variables": [table.variables[j] for j in b.variables],
                    "scale": plan.block_scale(b.query, b.variables)} for b in design.blocks],
        "expected_error": [{"margin": margin_label(g, table.letters), **e.as_dict()} for g, e in expected.items()],
    }


def release_warnings(release: Release) -> list[str]:
    """What a reader of the release must know before using it. Parameters and DP output only: public."""
    out = []
    if release.noise_mode != "release":
        # The seed is not published: with the released values it would give the noise back (internal/ has it).
        out.append(f"made in {release.noise_mode} mode: not produced by a secure sampler; do not publish")
    if release.noise.calibration == "paper":
        out.append("paper calibration, for reproducing the paper only")
    if not release.noise.epsilon_holds:
        out.append(
            f"the stated epsilon {release.noise.epsilon:g} does not hold: the noise gives epsilon "
            f"{release.noise.epsilon_actual:.6g} for the exact sensitivity"
        )
    # Every other note is a function of the plan and the DP output: public. The paper-calibration note
    # repeats what the lines above say.
    out += [n for n in release.notes if not n.startswith("paper calibration")]
    return out


# n' further than this share from n is flagged to the publisher (the audit's warnings and its at-a-glance box).
N_OFF_SHARE = 0.1


def evaluation_warnings(evaluation: ReleaseEvaluation) -> list[str]:
    """What the audit must flag about its own numbers (internal: it reads the confidential table)."""
    out = []
    # What a publisher must see before publishing (internal: these read the true counts).
    if evaluation.n > 0 and abs(evaluation.n_released - evaluation.n) > N_OFF_SHARE * evaluation.n:
        out.append("the released total n' is more than 10% away from the true n: the release misstates the "
                   "population's size (see n and n_released in the audit)")
    if evaluation.zeroed_categories:
        out.append(f"{len(evaluation.zeroed_categories)} categories that exist in the data were released as zero "
                   "(zeroed_categories in the audit): the release says nobody has them")
    if evaluation.released_fit_converged is False:
        out.append(
            "the refit of the model to the released margins did NOT converge: G2 of the release and the MLE "
            "distances are those of the last iterate, not of an MLE"
        )
    return out


def at_a_glance(release: Release, evaluation: ReleaseEvaluation | None = None) -> list[dict]:
    """What a reviewer must see first, as rows {item, value, flag} ("bad" marks what must be fixed or weighed
    before publishing). Without an evaluation (a release in memory, not yet compared with the truth) the rows
    read only the release: they are public. With one they read the confidential table (the audit's box)."""
    cal = release.noise
    rows = [("privacy", release.privacy or "", ""),
            ("mechanism", f"{release.mechanism}, then {release.estimator} and {release.rounding} rounding", "")]
    if release.noise_mode == "release":
        rows.append(("noise", "drawn by OpenDP's secure samplers", "ok"))
    else:
        rows.append(("noise", f"{release.noise_mode} mode (seeded numpy): NOT for publication", "bad"))
    if cal.epsilon_holds:
        rows.append(("calibration", f"{cal.calibration}: the stated epsilon {cal.epsilon:g} holds", "ok"))
    else:
        rows.append(("calibration", f"{cal.calibration}: the stated epsilon {cal.epsilon:g} does NOT hold (the noise "
                     f"gives {cal.epsilon_actual:.4g})", "bad"))
    guarantee = {"global": "global: the released margins are those of one non-negative table",
                 "local": "local only: the released margins agree where they overlap, but no single table is proved",
                 "none": "none: the released margins may disagree with each other"}
    rows.append(("consistency", guarantee.get(release.guarantee, str(release.guarantee)),
                 "ok" if release.guarantee == "global" else "bad" if release.guarantee == "none" else ""))
    if evaluation is None:
        rows.append(("released total", f"n' = {release.n_released:.6g}", ""))
    else:
        n, n_released = evaluation.n, evaluation.n_released
        off = abs(n_released - n) / n if n else 0.0
        rows.append(("released total", f"n = {n} -> n' = {n_released:.6g} ({100 * (n_released - n) / max(n, 1):+.1f}%)",
                     "bad" if off > N_OFF_SHARE else "ok"))
        worst = max(evaluation.l1_error_by_margin, key=evaluation.l1_error_by_margin.get)
        share = evaluation.max_l1_error / n if n else float("nan")
        rows.append(("worst margin error", f"L1 {evaluation.max_l1_error:.6g} on {worst}: {100 * share:.1f}% of n",
                     "bad" if share > UNFIT_ERROR_SHARE else ""))
        warnings = len(release_warnings(release)) + len(evaluation_warnings(evaluation))
        rows.append(("warnings", f"{warnings} (listed below)" if warnings else "none", "bad" if warnings else "ok"))
    return [{"item": item, "value": value, "flag": flag} for item, value, flag in rows]


def audit_figures(table: ContingencyTable, release: Release, evaluation: ReleaseEvaluation) -> dict:
    """The audit's pictures (PNG data URIs): every margin's error against the plan, and released against true
    counts for the margins whose error is largest against what the plan expected (up to MAX_MARGIN_FIGURES)."""
    from . import figures
    from .models import margin_label
    from .tables import margin_of

    realised = evaluation.l1_error_by_margin
    labels = [margin_label(g, table.letters) for g in release.margins]
    expected = evaluation.expected_l1_by_margin
    quantile = evaluation.expected_l1_quantile_by_margin
    out = {"errors": figures.errors_against_plan(
        labels, realised, expected, quantile, f"planned {100 * (1 - evaluation.bound_delta):g}% quantile"),
        "margins": None, "margins_shown": 0, "margins_left_out": 0}
    ranked = sorted(range(len(labels)), key=lambda i: -realised[labels[i]] / max(
        (expected or {}).get(labels[i], 1.0), 1e-12))
    shown = sorted(ranked[:figures.MAX_MARGIN_FIGURES])
    sds = evaluation.expected_cell_sd_by_margin or {}
    panels = [(f"{labels[i]}: {' x '.join(table.variables[j] for j in release.margins[i])}",
               margin_of(table, release.margins[i]), release.released_margins[i], sds.get(labels[i])) for i in shown]
    out["margins"] = figures.released_against_true(panels) if panels else None
    out["margins_shown"] = len(panels)
    out["margins_left_out"] = len(labels) - len(shown)
    return out


def audit_record(
    table: ContingencyTable, release: Release, evaluation: ReleaseEvaluation, public: Mapping, model_label: str
) -> dict:
    return _clean(
        {
            "schema": "tabrelease/audit/1",
            "at_a_glance": at_a_glance(release, evaluation),
            "release": dict(public),
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
            "notes": list(release.notes) + evaluation_warnings(evaluation),
        }
    )


def check_release_destination(out, force: bool) -> Path:
    """Refuse an --out a release may not be written to; the CLI calls this before any noise is drawn or budget
    charged, and the writer again before it writes."""
    out = Path(out)
    if out.exists() and not force:
        raise TabreleaseError(f"{out} already exists; choose another --out or pass --force to replace it")
    if out.exists() and not out.is_dir():
        raise TabreleaseError(f"{out} exists and is not a folder")
    if out.exists() and (foreign := foreign_entries(out, ("public", "internal"))):
        # --force replaces a release bundle, never a folder of other things (a mistyped --out).
        listed = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise TabreleaseError(f"{out} is not a release folder (it holds {listed}); --force replaces only a release; "
                              "choose another --out")
    if not out.resolve().parent.is_dir():
        raise TabreleaseError(f"the parent folder of {out} does not exist")
    return out


def _staging_prefix(out: Path) -> str:
    return f".{Path(out).name}.staging-"


def check_writable(out) -> None:
    """Can a bundle be written beside `out`? Tried for real (a folder made and removed) before anything is charged."""
    from ._signals import deferred_signals

    parent = Path(out).resolve().parent
    try:
        # Signals held: one acted on inside mkdtemp, after its mkdir, would leave the probe behind.
        with deferred_signals():
            probe = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(out)}{os.getpid()}-probe-", dir=parent))
            probe.rmdir()
    except OSError as exc:
        raise TabreleaseError(f"cannot write a release into {parent}: {exc.strerror}") from None


_STAGING_MARK = ".staging-"


def remove_stale_staging(out) -> list[Path]:
    """Staging folders in the folder of `out` left by releases that were killed (their process is gone), whatever
    release they were for: removed, and returned so that the caller can say so. They may hold an audit of a
    confidential table. Temporary files of dead processes (`_files.TEMPORARY_PREFIX`) go too."""
    from ._files import remove_dead_temporaries

    parent = Path(out).resolve().parent
    removed = []
    for candidate in parent.glob(f".*{_STAGING_MARK}*"):
        try:
            pid = int(candidate.name.rsplit(_STAGING_MARK, 1)[1].split("-", 1)[0])
        except (IndexError, ValueError):
            continue
        if candidate.is_dir() and not candidate.is_symlink() and not process_alive(pid):
            shutil.rmtree(candidate, ignore_errors=True)
            removed.append(candidate)
    return removed + remove_dead_temporaries(parent)


def margin_files(table, margins) -> list[str]:
    """Published file names people can read: the variables' names for people joined by "__" (hs__phs.csv), made
    safe for any file system; the letters (margin_AB.csv) where names would collide or run long."""
    import re

    names, _ = people_names(table)
    safe = [re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") for name in names]
    files = ["__".join(safe[j] for j in g) + ".csv" for g in margins]
    letters = [f"margin_{''.join(table.letters[j] for j in g)}.csv" for g in margins]
    if (len(set(files)) < len(files) or any(not safe[j] for g in margins for j in g)
            or any(len(f) > 150 for f in files) or "release.json" in files):
        return letters
    return files


def write_release_bundle(
    out: str | Path,
    table: ContingencyTable,
    release: Release,
    evaluation: ReleaseEvaluation,
    *,
    model_label: str,
    version: str,
    force: bool = False,
    workbook: bool = False,
    charge: Mapping | None = None,
) -> Path:
    """Write DIR/public and DIR/internal; refuse an existing DIR unless `force`. With `workbook`, public/ also holds
    the margins as one .xlsx workbook (the same content as its CSV files and release.json). `charge`, the ledger's
    record of the release's charge, is kept in internal/charge.json (ledger id, record number and MAC) and its
    random release id in public/release.json, so that `ledger verify --bundles` can hold bundles and charges
    together."""
    from ._signals import deferred_signals

    out = check_release_destination(out, force)
    parent = out.resolve().parent
    staging = None
    try:
        # Owner-only (mkdtemp), named with this process's id so that a later run can tell a killed run's folder.
        # Signals held until `staging` names it: one acted on inside mkdtemp, after its mkdir, would leave it behind.
        with deferred_signals():
            staging = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(out)}{os.getpid()}-", dir=parent))
        public_dir = staging / "public"
        internal_dir = staging / "internal"
        public_dir.mkdir()
        internal_dir.mkdir()
        public = release_parameters(table, release, version, None if charge is None else charge.get("release_id"))
        if workbook:
            from .workbook import WORKBOOK_FILE

            public["workbook"] = WORKBOOK_FILE
        # The schema is the allow-list of public/: nothing it does not name is written.
        validate(public, schemas.RELEASE)
        for spec, g, values in zip(public["margins"], release.margins, release.released_margins):
            write_long_csv(public_dir / spec["file"], *people_names(table), g, values)
        (public_dir / "release.json").write_text(json.dumps(public, indent=2) + "\n")
        if workbook:
            from .workbook import write_workbook

            # The rows of the CSV files just written, from the same values; labels as they are (a workbook cell
            # is written as text, so it needs no protective quote against formulas).
            names, levels = people_names(table)
            sheets = [([names[a] for a in g] + ["count"], list(long_rows(levels, g, values)))
                      for g, values in zip(release.margins, release.released_margins)]
            write_workbook(public_dir / public["workbook"], public, sheets)
        if charge is not None:
            from .ledger import CHARGE_FILE

            (internal_dir / CHARGE_FILE).write_text(json.dumps(
                {key: charge.get(key) for key in ("ledger_id", "sequence", "mac", "release_id", "dataset", "time")},
                indent=2) + "\n")
        audit = audit_record(table, release, evaluation, public, model_label)
        validate(audit, schemas.AUDIT)
        (internal_dir / "audit.json").write_text(json.dumps(audit, indent=2) + "\n")
        if release.table is not None:
            # w', the rounded table whose margins were released (itself a post-processed DP output).
            table.with_counts(release.table).write_csv(internal_dir / "released_table.csv")
        (internal_dir / "audit.html").write_text(render_audit_html(audit, audit_figures(table, release, evaluation)))
        with deferred_signals():  # the bundle appears whole (and an old one goes whole), or not at all
            if out.exists():
                old = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(out)}{os.getpid()}-old-", dir=parent))
                os.replace(out, old / out.name)
                os.replace(staging, out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(staging, out)
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


_AUDIT_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>tabrelease audit: {{ a.table.name }}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
.glance { border: 2px solid #2166ac; border-radius: 6px; padding: 0.4rem 1rem; margin: 1rem 0; }
.glance table { margin: 0.3rem 0; } .glance td, .glance th { border: none; border-bottom: 1px solid #e3e3e3; }
.figs { display: flex; flex-wrap: wrap; gap: 0.5rem; } .figs img { width: 25rem; max-width: 100%; }
img.wide { max-width: 100%; } table { max-width: 100%; } td { overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; } td, th { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }
th { background: #f2f2f2; } .warn { background: #fff3cd; border: 1px solid #e0c36a; padding: 0.6rem; margin: 0.6rem 0; }
.ok { color: #1b6e20; } .bad { color: #a61b1b; font-weight: bold; } code { background: #f5f5f5; padding: 0 0.2rem; }
</style></head><body>
<h1>Release audit — {{ a.table.name }}</h1>
<p><strong>Internal: this page describes the confidential table. Do not publish it.</strong></p>
<div class="glance"><h2>At a glance</h2><table>
{% for r in a.at_a_glance %}<tr><th>{{ r.item }}</th><td{% if r.flag %} class="{{ r.flag }}"{% endif %}>{{ r.value }}</td></tr>
{% endfor %}</table></div>
{% for w in a.release.warnings %}<div class="warn">{{ w }}</div>{% endfor %}
{% for n in a.notes if n not in a.release.warnings %}<div class="warn">{{ n }}</div>{% endfor %}
<h2>Release</h2>
<table>
<tr><th>mechanism</th><td>{{ a.release.mechanism }}{% if a.release.basis %} ({{ a.release.basis }} basis){% endif %}</td></tr>
<tr><th>privacy</th><td>{{ a.release.privacy }}</td></tr>
<tr><th>margins</th><td>{% for m in a.release.margins %}<code>{{ m.label }}</code> {% endfor %}</td></tr>
<tr><th>noise</th><td>{% if a.release.plan %}{{ a.release.noise.distribution }}, planned per block (below); {% else %}{{ a.release.noise.distribution }}, scale {{ "%.6g"|format(a.release.noise.scale) }}, {% endif %}{{ a.release.noise.sampler }}</td></tr>
<tr><th>made</th><td>{{ a.release.created }} by tabrelease {{ a.release.tool_version }}</td></tr>
</table>
{% if a.release.plan %}<h2>What was measured (the plan)</h2>
<p>Total: {{ a.release.plan.total }}. Margin blocks have their scale in counts; residual blocks (Fourier or Efron–Stein coefficients) in coefficient units.</p>
<table><tr><th>block</th><th>variables</th><th>noise scale</th></tr>
{% for b in a.release.plan.blocks %}<tr><td>{{ b.query }}</td><td>{{ b.variables|join(", ") }}</td><td>{{ "%.6g"|format(b.scale) }}</td></tr>
{% endfor %}</table>{% endif %}
<h2>Calibration check</h2>
<table>
<tr><th>exact {{ a.calibration_check.sensitivity_norm }} sensitivity</th><td>{{ "%.6g"|format(a.calibration_check.sensitivity) }}</td></tr>
<tr><th>calibration</th><td>{{ a.calibration_check.calibration }}</td></tr>
<tr><th>&epsilon; given by the noise</th><td>{{ "%.6g"|format(a.calibration_check.epsilon_actual) }}
 {% if a.calibration_check.epsilon_holds %}<span class="ok">stated &epsilon; holds</span>{% else %}<span class="bad">stated &epsilon; does NOT hold</span>{% endif %}</td></tr>
</table>
<h2>What the release did</h2>
{% set e = a.evaluation %}
<table>
<tr><th>sample size n → n'</th><td>{{ e.n }} → {{ "%.6g"|format(e.n_released) }}: the released margins sum to {{ "%.6g"|format(e.n_released) }} people where the table has {{ e.n }}, so the release states the population's size {% if e.n_released >= e.n %}over{% else %}under{% endif %} by {{ "%.6g"|format((e.n_released - e.n)|abs) }} ({{ "%.1f"|format(100 * (e.n_released - e.n)|abs / [e.n, 1]|max) }}%).</td></tr>
{% if a.lp %}<tr><th>LP b*</th><td>{{ "%.6g"|format(a.lp.b_star) }} {% if a.lp.infeasible %}(no non-negative table has the noisy coefficients){% else %}(feasible){% endif %}; {{ "%.1f"|format(1000 * a.lp.seconds) }} ms. The consistency LP found the non-negative table whose coefficients are closest to the noisy ones in the largest single difference; b* is that difference: 0 would mean the noisy coefficients were already those of a non-negative table, and the larger it is, the more the noise had to be corrected before any table could be released.</td></tr>{% endif %}
<tr><th>max L1 error of a released margin</th><td>{{ "%.6g"|format(e.max_l1_error) }}</td></tr>
<tr><th>model refitted</th><td><code>{{ a.model_refitted }}</code></td></tr>
{% if e.refit_note %}<tr><th>refit</th><td>{{ e.refit_note }}</td></tr>{% else %}<tr><th>G² original</th><td>{{ "%.4f"|format(e.g2_original) }} (df {{ e.df_original }} nominal, {{ e.df_adjusted_original }} adjusted)</td></tr>{% endif %}
<tr><th>G² released</th><td>{% if e.g2_released is not none %}{{ "%.4f"|format(e.g2_released) }} (difference {{ "%+.4f"|format(e.g2_difference) }}){% else %}not defined: no released table{% endif %}</td></tr>
<tr><th>MLE distance, original vs released</th><td>{% if e.mle_l1 is not none %}L1 {{ "%.4f"|format(e.mle_l1) }}, total variation {{ "%.4f"|format(e.mle_total_variation) }}{% else %}not defined: the released margins are inconsistent{% endif %}</td></tr>
</table>
<h2>Per margin</h2>
{% if figures.errors %}<p><img class="wide" src="{{ figures.errors }}" alt="realised L1 error of each margin against the plan"></p>{% endif %}
<table><tr><th>margin</th><th>L1 error</th><th>planned expected L1</th><th>planned {{ "%g"|format(100 * (1 - e.bound_delta)) }}% quantile</th>{% if e.paper_bound_by_margin %}<th>paper's Theorem 1/3 at &delta; = {{ e.bound_delta }}</th>{% endif %}</tr>
{% for label, err in e.l1_error_by_margin.items() %}
<tr><td><code>{{ label }}</code></td><td>{{ "%.6g"|format(err) }}</td><td>{% if e.expected_l1_by_margin %}{{ "%.4g"|format(e.expected_l1_by_margin[label]) }}{% else %}—{% endif %}</td><td>{% if e.expected_l1_quantile_by_margin %}{{ "%.4g"|format(e.expected_l1_quantile_by_margin[label]) }}{% if err > e.expected_l1_quantile_by_margin[label] %} <span class="bad">exceeded</span>{% endif %}{% else %}—{% endif %}</td>
{% if e.paper_bound_by_margin %}<td>{{ "%.6g"|format(e.paper_bound_by_margin[label]) }}</td>{% endif %}</tr>
{% endfor %}</table>
<p>The planned expected L1 error is the plan's, computed before the noise was drawn: that of the unbiased linear reconstruction of the measurements (before non-negativity, the estimator and rounding, which usually reduce it), under a normal approximation. The quantile is an upper {{ "%g"|format(100 * (1 - e.bound_delta)) }}% quantile of that error (each cell within its z-score, a union over the margin's cells). {% if e.paper_bound_by_margin %}The paper's bound is stated for the paper's noise scale; it is shown for comparison, whatever the calibration.{% endif %}{% if e.l1_bound_by_margin %} A looser bound derived here for the LP (a union bound over every coefficient) is kept in audit.json.{% endif %}</p>
{% if figures.margins %}<h3>Released against true counts</h3>
<p>Each point is a cell of the margin; on the grey line the release is exact{% if e.expected_cell_sd_by_margin %}, and the blue band is each cell's planned 95% range{% endif %}.{% if figures.margins_left_out %} Shown: the {{ figures.margins_shown }} margins whose error is largest against the plan; {{ figures.margins_left_out }} more are in the table above.{% endif %}</p>
<p><img class="wide" src="{{ figures.margins }}" alt="released against true counts, per margin"></p>{% endif %}
<h2>Disclosure risk (classical view)</h2>
{% set d = a.disclosure_risk %}
<p>What a plain, non-private release of these margins would have shown, and the released margins' small cells (1 to {{ d.small_count }}).</p>
<table><tr><th>margin</th><th>cells</th><th>true 1s</th><th>true 2s</th><th>smallest non-zero</th><th>released small</th><th>… true 0</th><th>… true 1–{{ d.small_count }}</th><th>… equal to truth</th><th>true small released as 0</th></tr>
{% for label, r in d.margins.items() %}
<tr><td><code>{{ label }}</code></td><td>{{ r.cells }}</td><td>{{ r.true_count_1 }}</td><td>{{ r.true_count_2 }}</td><td>{{ r.smallest_nonzero if r.smallest_nonzero is not none else "—" }}</td>
<td>{{ r.released_small }}</td><td>{{ r.released_small_true_zero }}</td><td>{{ r.released_small_true_small }}</td><td>{{ r.released_small_true_exact }}</td><td>{{ r.true_small_released_zero }}</td></tr>
{% endfor %}
{% set r = d.full_table %}<tr><td>full table</td><td>{{ r.cells }}</td><td>{{ r.true_count_1 }}</td><td>{{ r.true_count_2 }}</td><td>{{ r.smallest_nonzero if r.smallest_nonzero is not none else "—" }}</td>
{% if r.released_small is defined %}<td>{{ r.released_small }}</td><td>{{ r.released_small_true_zero }}</td><td>{{ r.released_small_true_small }}</td><td>{{ r.released_small_true_exact }}</td><td>{{ r.true_small_released_zero }}</td>{% else %}<td colspan="5">no released table</td>{% endif %}</tr>
</table>
{% if e.bound_source %}<p>Bound: {{ e.bound_source }}.</p>{% endif %}
</body></html>
"""


def render_audit_html(audit: Mapping, figures: Mapping | None = None) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    figures = figures or {"errors": None, "margins": None, "margins_shown": 0, "margins_left_out": 0}
    return env.from_string(_AUDIT_TEMPLATE).render(a=audit, figures=figures)
