"""Readable summaries of the main result objects in Jupyter (`_repr_html_`): the audit's "at a glance" box.

A release in memory shows what it states about itself (public: parameters and the DP output); a published
release, which was compared with the confidential table, shows the audit's box whole. Every value is escaped.

The records do not import this module: importing it registers its renderers with `_display` (the records'
`_repr_html_` call `_display.html_for`), so that presentation is attached from above (see `_display`).
"""

from __future__ import annotations

from collections.abc import Iterable

from markupsafe import escape

from ._display import register_html

_STYLE = "border-collapse:collapse;margin:0.3rem 0"
_CELL = "border-bottom:1px solid #e3e3e3;padding:0.15rem 0.6rem;text-align:left;vertical-align:top"
_COLOURS = {"ok": "#1b6e20", "bad": "#a61b1b", "": "inherit"}


def glance_html(title: str, rows: Iterable[dict]) -> str:
    """An HTML box of {item, value, flag} rows under a title (flag "ok" green, "bad" red and bold).

    Parameters
    ----------
    title : str
    rows : iterable of dict
        Each with `item` and `value` (text), and optionally `flag` ("ok", "bad" or "").

    Returns
    -------
    str
        An HTML fragment; every title, item and value escaped.
    """
    body = "".join(
        f'<tr><th style="{_CELL}">{escape(r["item"])}</th><td style="{_CELL};color:{_COLOURS[r.get("flag", "")]}'
        f'{";font-weight:bold" if r.get("flag") == "bad" else ""}">{escape(r["value"])}</td></tr>'
        for r in rows)
    return (f'<div style="border:2px solid #2166ac;border-radius:6px;padding:0.3rem 0.8rem;max-width:52rem">'
            f'<strong>{escape(title)}</strong><table style="{_STYLE}">{body}</table></div>')


def release_html(release, evaluation=None) -> str:
    """A release's "at a glance" box, for Jupyter.

    Parameters
    ----------
    release : Release
    evaluation : ReleaseEvaluation or None
        With it, the audit's whole box, which reads the confidential table (internal); without it, only what the
        release states about itself (public).

    Returns
    -------
    str
        An HTML fragment.
    """
    from .reports import at_a_glance

    rows = at_a_glance(release, evaluation)
    rows.insert(2, {"item": "margins", "value": " ".join(_labels(release.margins, _names(release.plan))),
                    "flag": ""})
    title = "tabrelease release" + (" (audited against the confidential table: internal)" if evaluation else "")
    return glance_html(title, rows)


def plan_html(plan) -> str:
    """A plan's box, for Jupyter: mechanism, privacy statement, margins, shape and each margin's expected L1 error.

    Parameters
    ----------
    plan : MechanismPlan
        Read before any data is (it holds no counts).

    Returns
    -------
    str
        An HTML fragment.
    """

    mechanism = plan.implementation
    rows = [{"item": "mechanism", "value": plan.mechanism, "flag": ""},
            {"item": "privacy", "value": mechanism.privacy_statement(plan), "flag": ""},
            {"item": "margins", "value": " ".join(_labels(plan.margins, _names(plan))), "flag": ""},
            {"item": "table shape", "value": " x ".join(str(k) for k in plan.shape), "flag": ""}]
    expected = mechanism.expected_errors(plan) or {}
    for g, error in expected.items():
        rows.append({"item": f"expected L1 {_labels([g], _names(plan))[0]}",
                     "value": f"{error.expected_l1:.4g} (cell sd {error.cell_sd:.3g}, {error.cells} cells)", "flag": ""})
    return glance_html("tabrelease plan (before any data is read)", rows)


def fit_html(fit) -> str:
    """A log-linear fit's box, for Jupyter: model, n, G² and its degrees of freedom, Pearson X², MLE, convergence.

    Parameters
    ----------
    fit : LogLinearFit

    Returns
    -------
    str
        An HTML fragment.
    """
    rows = [{"item": "model", "value": _model(fit.model), "flag": ""},
            {"item": "n", "value": f"{fit.n:.6g}", "flag": ""},
            {"item": "G²", "value": f"{fit.g2:.4f} on {fit.df} df ({fit.df_adjusted} adjusted for zeros)", "flag": ""},
            {"item": "Pearson X²", "value": f"{fit.pearson_x2:.4f}", "flag": ""},
            {"item": "MLE", "value": "exists" if fit.mle_exists else "does not exist: the extended MLE on the facial set",
             "flag": "" if fit.mle_exists else "bad"},
            {"item": "converged", "value": f"{fit.converged} after {fit.iterations} iterations",
             "flag": "ok" if fit.converged else "bad"}]
    return glance_html("log-linear fit", rows)


def _names(plan) -> tuple[str, ...] | None:
    return getattr(plan, "variable_names", None)


def _labels(margins, names=None) -> list[str]:
    """Margins by their variables' names for people where the plan knows them (`tables.margin_title`); by letters
    only for a plan made without a table (`plan_release` on a shape), which has no names to show."""
    from .models import margin_label
    from .tables import LETTERS, margin_title

    if names is not None:
        return [margin_title(names, g) for g in margins]
    return [margin_label(g, LETTERS) for g in margins]


def _model(model) -> str:
    return "".join(_labels(model.generators))


def _published_html(published) -> str:
    return release_html(published.release, published.evaluation)


# Registered by name, so that this module imports none of the records it draws.
for _type_name, _render in (("tabrelease.pipeline.Release", release_html),
                            ("tabrelease.workflow.PublishedRelease", _published_html),
                            ("tabrelease.mechanisms._base.MechanismPlan", plan_html),
                            ("tabrelease.loglinear.fit.LogLinearFit", fit_html)):
    register_html(_type_name, _render)
