"""ReleaseSpec: one frozen, validated value built from one list of settings, which the command line, batch files and
sweeps all read; a batch's dry run refuses what its run refuses; an unexpected exception is one line naming its
type."""

from __future__ import annotations

import re
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from tabrelease import ReleaseSpec, TabreleaseError, builtin_table, loss_of, unit_of
from tabrelease.batch import dry_run, read_spec, run_batch
from tabrelease.cli import main
from tabrelease.cli.sweep import SWEEP_VARIES
from tabrelease.ledger import init_ledger, ledger_entries
from tabrelease.privacy import APPROXIMATE, PURE, PrivacyLoss, PrivacyUnit
from tabrelease.spec import INPUT_SETTING_NAMES, SETTING_NAMES, spec_from_settings


@pytest.fixture(autouse=True)
def no_environment(monkeypatch):
    monkeypatch.delenv("TABRELEASE_LEDGER_KEY", raising=False)
    monkeypatch.delenv("TABRELEASE_LEDGER_ANCHOR", raising=False)
    monkeypatch.delenv("TABRELEASE_DEBUG", raising=False)


# --- a. the value ---------------------------------------------------------------------------------------------------
@pytest.mark.unit
def test_a_spec_is_frozen_and_keyword_only():
    spec = ReleaseSpec(loss=loss_of(1.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.mechanism = "cells"
    with pytest.raises(TypeError):
        ReleaseSpec(loss_of(1.0))  # positional: refused
    # The defaults, and the loss and unit as values.
    assert spec.loss == PrivacyLoss(kind=PURE, epsilon=1.0) and spec.unit == PrivacyUnit(kind="add-remove")
    assert (spec.mechanism, spec.calibration, spec.mode, spec.seed, spec.options) == ("planned", "exact", "release",
                                                                                      None, ())
    # Equal settings make equal, hashable specs (a sweep hashes and pickles them).
    same = ReleaseSpec(loss=loss_of(1.0), options={"public_total": True, "plan_objective": "max-cell-variance"})
    again = ReleaseSpec(loss=loss_of(1.0), options={"plan_objective": "max-cell-variance", "public_total": True})
    assert same == again and hash(same) == hash(again) and same != spec


@pytest.mark.parametrize("make, message", [
    (lambda: ReleaseSpec(loss=loss_of(0)), "epsilon must be a positive finite number, not 0"),
    (lambda: ReleaseSpec(loss=loss_of(float("nan"))), "epsilon must be a positive finite number"),
    (lambda: ReleaseSpec(loss=1.0), "a release's loss is pure epsilon or (epsilon, delta)"),
    (lambda: ReleaseSpec(loss=loss_of(1.0, 1.0)), "delta must lie strictly between 0 and 1, not 1.0"),
    (lambda: ReleaseSpec(loss=loss_of(1.0, -1e-6)), "delta must lie strictly between 0 and 1"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), unit="household"), "unknown privacy unit 'household'"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), unit="local"), "a release is calibrated for one of the units"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), unit=unit_of("add-remove", sensitive=["A"])), "give --neighbours replace"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), unit=unit_of("neighbourly")), "unknown neighbour relation"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), seed=3), "release mode draws from a secure sampler and accepts no seed"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), mode="simulation", seed=-3), "a seed is a non-negative whole number"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), calibration="approximate"), "unknown calibration 'approximate'"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), rounding="stochastic"), "unknown rounding 'stochastic'"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), mode="test"), "unknown mode 'test'"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), bound_delta=1.0), "--bound-delta must lie strictly between 0 and 1"),
    (lambda: ReleaseSpec(loss=loss_of(1.0), mechanism="sensitive-attributes", options={"sensitive": ["A"]}),
     "the sensitive attributes are the privacy unit's"),
])
def test_a_bad_spec_is_refused_in_words(make, message):
    with pytest.raises(TabreleaseError) as refused:
        make()
    assert message in str(refused.value)


# Every setting at a value other than its default (the sensitive unit needs replace neighbours; a seed, simulate).
ALL_SETTINGS = {
    "epsilon": 0.7, "delta": 1e-6, "neighbours": "replace", "sensitive": ["A", "C"], "margins": "[AB][BC]",
    "mechanism": "sensitive-attributes", "public_total": True, "plan_objective": "max-cell-variance",
    "plan_candidates": "closure", "nonneg_t": 3.0, "calibration": "paper", "estimator": "least-squares", "rounding": "nearest", "simulate": True, "seed": 5,
    "bound_delta": 0.01, "xlsx": True, "out_sep": "semicolon", "out_bom": True,
}


@pytest.mark.unit
def test_every_setting_lands_in_its_field():
    assert set(ALL_SETTINGS) == set(SETTING_NAMES)  # the case covers every setting there is
    spec = spec_from_settings(ALL_SETTINGS)
    assert spec.loss == PrivacyLoss(kind=APPROXIMATE, epsilon=0.7, delta=1e-6)
    assert spec.unit == PrivacyUnit(kind="sensitive-attributes", attributes=("A", "C"))
    assert spec.neighbours == "replace" and spec.sensitive == ("A", "C")
    assert spec.margins == "[AB][BC]" and spec.mechanism == "sensitive-attributes"
    # The mechanism's options, and only they, land in `options`.
    assert dict(spec.options) == {"public_total": True, "plan_objective": "max-cell-variance",
                                  "plan_candidates": "closure", "nonneg_t": 3.0}
    assert (spec.calibration, spec.estimator, spec.rounding) == ("paper", "least-squares", "nearest")
    assert (spec.mode, spec.seed, spec.bound_delta, spec.workbook) == ("simulation", 5, 0.01, True)
    assert (spec.out_sep, spec.out_bom) == ("semicolon", True)
    # Text, as the command line gives it, makes the same spec.
    text = {k: (v if isinstance(v, bool) else ",".join(v) if isinstance(v, list) else str(v))
            for k, v in ALL_SETTINGS.items()}
    assert spec_from_settings(text) == spec
    # Left out, every setting takes its default: the spec of `release --epsilon 0.7`.
    assert spec_from_settings({"epsilon": 0.7}) == ReleaseSpec(loss=loss_of(0.7))


@pytest.mark.parametrize("settings, message", [
    ({"epsilon": 1.0, "colour": "red"}, "unknown setting 'colour'"),
    ({"epsilon": 1.0, "sensitive": "A"}, "give --neighbours replace"),
    ({"epsilon": 1.0, "seed": 4}, "accepts no seed"),
    ({"epsilon": 1.0, "rounding": "up"}, "unknown rounding 'up'"),
    ({"epsilon": 1.0, "public_total": "yes"}, "public_total is true or false"),
    ({}, "give epsilon"),
])
def test_spec_from_settings_refuses_what_it_does_not_know(settings, message):
    with pytest.raises(TabreleaseError) as refused:
        spec_from_settings(settings)
    assert message in str(refused.value)


# --- b. a dry run refuses what the run refuses ----------------------------------------------------------------------
def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return repr(value)


def _batch(folder, release: dict, dataset: dict | None = None, name="season.toml"):
    dataset = {"builtin": "czech"} if dataset is None else dataset
    lines = ['ledger = "ledger.json"', "[datasets.data]"] + [f"{k} = {_toml(v)}" for k, v in dataset.items()]
    lines += ["[[releases]]", 'dataset = "data"'] + [f"{k} = {_toml(v)}" for k, v in release.items()]
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _huge_table(folder):
    """A 2 x 2 table with one count of 2^62 + 1, as a CSV with its levels declared: release mode's sampler draws
    n x W on 64-bit integers, which the cells mechanism (W = 1) cannot hold for this n."""
    frame = pd.DataFrame({"A": ["a0", "a0", "a1", "a1"], "B": ["b0", "b1", "b0", "b1"],
                          "count": [str(2**62 + 1), "1", "2", "3"]})
    frame.to_csv(folder / "huge.csv", index=False)
    (folder / "levels.json").write_text(json.dumps({"A": ["a0", "a1"], "B": ["b0", "b1"]}))
    return {"file": "huge.csv", "levels": "levels.json"}


def test_a_dry_run_refuses_counts_beyond_the_secure_sampler_as_the_run_does(tmp_path):
    from tabrelease.noise import MAX_SAMPLER_INTEGER

    assert (2**62 + 1) + 6 > MAX_SAMPLER_INTEGER  # n x W with W = 1: beyond the sampler's integers
    ledger = init_ledger(tmp_path / "ledger.json")
    path = _batch(tmp_path, {"epsilon": 1.0, "mechanism": "cells", "margins": "[AB]", "out": "r"}, _huge_table(tmp_path))
    spec = read_spec(path)  # the spec itself is fine: the table is what the sampler cannot take
    before = ledger.read_bytes()
    with pytest.raises(TabreleaseError) as predicted:
        dry_run(spec)
    with pytest.raises(TabreleaseError) as refused:
        run_batch(spec)
    assert "too large for release mode's 64-bit secure sampler" in str(refused.value)
    assert str(predicted.value) == str(refused.value) and type(predicted.value) is type(refused.value)
    assert str(2**62 + 1) not in str(refused.value)  # no count in the message
    assert ledger.read_bytes() == before and ledger_entries(ledger) == [] and not (tmp_path / "r").exists()
    # The same release of small counts would be made: the refusal is the counts'.
    frame = pd.read_csv(tmp_path / "huge.csv", dtype=str).assign(count=["4", "1", "2", "3"])
    frame.to_csv(tmp_path / "small.csv", index=False)
    ok = read_spec(_batch(tmp_path, {"epsilon": 1.0, "mechanism": "cells", "margins": "[AB]", "out": "r"},
                          {"file": "small.csv", "levels": "levels.json"}, name="small.toml"))
    assert [s.status for s in dry_run(ok).steps] == ["would be made"]


def test_a_dry_run_refuses_a_destination_that_exists(tmp_path):
    ledger = init_ledger(tmp_path / "ledger.json")
    spec = read_spec(_batch(tmp_path, {"epsilon": 0.5, "out": "r", "simulate": True}))
    (tmp_path / "r").mkdir()  # made after the spec was read
    before = ledger.read_bytes()
    with pytest.raises(TabreleaseError) as predicted:
        dry_run(spec)
    with pytest.raises(TabreleaseError) as refused:
        run_batch(spec)
    assert "already exists" in str(predicted.value) and str(predicted.value) == str(refused.value)
    assert ledger.read_bytes() == before and ledger_entries(ledger) == [] and list((tmp_path / "r").iterdir()) == []


# --- c. every setting in a batch file -------------------------------------------------------------------------------
# Per setting: the release's keys (that setting at a value other than its default, with what it needs to apply).
BATCH_CASES = {
    "epsilon": {"epsilon": 2.5},
    "delta": {"delta": 1e-6, "mechanism": "gaussian"},
    "neighbours": {"neighbours": "replace"},
    "sensitive": {"sensitive": ["A"], "neighbours": "replace", "mechanism": "sensitive-attributes"},
    "margins": {"margins": "[AB][BC]"},
    "mechanism": {"mechanism": "auto"},
    "public_total": {"public_total": True},
    "plan_objective": {"plan_objective": "max-cell-variance"},
    "plan_candidates": {"plan_candidates": "closure"},
    "nonneg_t": {"nonneg_t": 3.0, "mechanism": "nonneg"},
    "calibration": {"calibration": "paper", "mechanism": "auto"},
    "estimator": {"estimator": "least-squares", "mechanism": "auto"},
    "rounding": {"rounding": "nearest"},
    "simulate": {"simulate": True},
    "seed": {"seed": 5, "simulate": True},
    "bound_delta": {"bound_delta": 0.01},
    "xlsx": {"xlsx": True},
    "out_sep": {"out_sep": ";"},
    "out_bom": {"out_bom": True},
}


@pytest.mark.unit
def test_the_batch_cases_cover_every_setting():
    assert set(BATCH_CASES) == set(SETTING_NAMES)


@pytest.mark.parametrize("name", SETTING_NAMES)
def test_every_release_setting_is_read_from_a_batch_file(name, tmp_path):
    if name == "xlsx":
        pytest.importorskip("openpyxl")
    init_ledger(tmp_path / "ledger.json")
    settings = {"epsilon": 0.7, **BATCH_CASES[name]}
    batch = read_spec(_batch(tmp_path, {**settings, "out": "r"}))
    (release,) = batch.releases
    assert release.spec == spec_from_settings(settings)
    # The setting took effect: without it the spec differs.
    without = {k: v for k, v in settings.items() if k != name} if name != "epsilon" else {"epsilon": 0.7}
    assert release.spec != spec_from_settings(without)
    # And the release it asks for can be made: the dry run plans it against the table and would make it.
    (step,) = dry_run(batch).steps
    assert step.status == "would be made", step.reason


def test_a_simulated_batch_release_records_its_post_processing_and_plan(tmp_path):
    from tabrelease.testing import plan_at

    ledger = init_ledger(tmp_path / "ledger.json")
    settings = {"epsilon": 0.8, "margins": "[AB][BCDE]", "public_total": True, "plan_objective": "max-cell-variance",
                "plan_candidates": "closure", "rounding": "nearest", "estimator": "least-squares", "simulate": True, "seed": 11}
    result = run_batch(read_spec(_batch(tmp_path, {**settings, "out": "r"})))
    assert [s.status for s in result.steps] == ["made"] and len(ledger_entries(ledger)) == 1
    public = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    assert public["mechanism"] == "planned" and public["epsilon"] == 0.8
    assert public["estimator"] == "least-squares" and public["rounding"] == "nearest"
    assert public["noise"]["mode"] == "simulation"
    # The total is public: recorded so, and as a parameter of the plan.
    assert public["plan"]["total"] == "public" and public["parameters"]["total_is_public"] == 1
    # The objective shapes the recorded block scales: those of a plan made here with it, not those of the default's.
    shape = builtin_table("czech").shape

    def scales(options):
        plan = plan_at(shape, [(0, 1), (1, 2, 3, 4)], 0.8, options=options)
        return sorted(plan.block_scale(b.query, b.variables) for b in plan.design.blocks)

    recorded = sorted(b["scale"] for b in public["plan"]["blocks"])
    wanted = scales({"public_total": True, "plan_objective": "max-cell-variance", "plan_candidates": "closure"})
    assert recorded == pytest.approx(wanted, rel=1e-12)
    assert not np.allclose(wanted, scales({"public_total": True, "plan_candidates": "closure"}), rtol=1e-6)


# Per input setting: the files a dataset reads, its entry's keys, and what the table read must be.
def _write(folder, name, text, encoding="utf-8"):
    (folder / name).write_bytes(text.encode(encoding))


def _input_case(name, folder):
    counts = "A,B,count\nx,p,3\nx,q,1\ny,p,2\ny,q,5\n"
    if name == "count_column":
        _write(folder, "t.csv", counts.replace("count", "n"))
        return {"file": "t.csv", "count_column": "n"}, "n", lambda t: t.n == 11
    if name == "sparse":
        _write(folder, "t.csv", "A,B,count\nx,p,3\nx,q,1\ny,p,2\n")  # y,q left out: a zero
        return {"file": "t.csv", "sparse": True}, True, lambda t: t.n == 6 and t.counts.tolist() == [[3, 1], [2, 0]]
    if name == "microdata":
        _write(folder, "t.csv", "A,B\nx,p\nx,p\ny,q\n")
        return {"file": "t.csv", "microdata": True}, True, lambda t: t.n == 3 and t.variables == ("A", "B")
    if name == "engine":
        _write(folder, "t.csv", "A,B\nx,p\nx,p\ny,q\n")
        return ({"file": "t.csv", "microdata": True, "engine": "pandas"}, "pandas",
                lambda t: t.counts.tolist() == [[2, 0], [0, 1]])
    if name == "scheduler":
        distributed = pytest.importorskip("distributed")
        cluster = distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None)
        _CLUSTERS.append(cluster)
        _write(folder, "t.csv", "A,B\nx,p\nx,p\ny,q\n")
        return ({"file": "t.csv", "microdata": True, "engine": "dask", "scheduler": cluster.scheduler_address},
                cluster.scheduler_address, lambda t: t.counts.tolist() == [[2, 0], [0, 1]])
    if name == "variables":
        _write(folder, "t.csv", "A,B,C\nx,p,u\nx,p,v\ny,q,u\n")
        return ({"file": "t.csv", "microdata": True, "variables": ["A", "C"]}, ("A", "C"),
                lambda t: t.variables == ("A", "C") and t.n == 3)
    if name == "levels":
        _write(folder, "t.csv", counts)
        _write(folder, "levels.json", json.dumps({"A": ["y", "x"], "B": ["q", "p"]}))
        return ({"file": "t.csv", "levels": "levels.json"}, folder / "levels.json",
                lambda t: t.levels == (("y", "x"), ("q", "p")) and t.counts.tolist() == [[5, 2], [1, 3]])
    if name == "metadata":
        _write(folder, "t.csv", counts)
        meta = {"variables": [{"name": "A", "levels": ["y", "x"]}, {"name": "B", "levels": ["p", "q"]}]}
        _write(folder, "meta.json", json.dumps(meta))
        return ({"file": "t.csv", "metadata": "meta.json"}, folder / "meta.json",
                lambda t: t.levels == (("y", "x"), ("p", "q")) and t.counts.tolist() == [[2, 5], [3, 1]])
    if name == "sheet":
        pytest.importorskip("openpyxl")
        with pd.ExcelWriter(folder / "t.xlsx") as writer:
            pd.DataFrame({"note": ["not the counts"]}).to_excel(writer, sheet_name="readme", index=False)
            pd.read_csv(pd.io.common.StringIO(counts)).to_excel(writer, sheet_name="counts", index=False)
        return {"file": "t.xlsx", "sheet": "counts"}, "counts", lambda t: t.n == 11
    if name == "sep":
        _write(folder, "t.csv", counts.replace(",", ";"))
        return {"file": "t.csv", "sep": "semicolon"}, "semicolon", lambda t: t.n == 11 and t.variables == ("A", "B")
    if name == "encoding":
        _write(folder, "t.csv", counts.replace("x", "\u00e9"), encoding="latin-1")
        return {"file": "t.csv", "encoding": "latin-1"}, "latin-1", lambda t: "\u00e9" in t.levels[0]
    if name == "decimal":
        _write(folder, "t.csv", "A;B;count\nx;p;3,0\nx;q;1\ny;p;2\ny;q;5,0\n")
        return {"file": "t.csv", "sep": "semicolon", "decimal": ","}, ",", lambda t: t.n == 11
    if name == "thousands":
        _write(folder, "t.csv", "A,B,count\nx,p,1.234\nx,q,1\ny,p,2\ny,q,5\n")
        return {"file": "t.csv", "thousands": "."}, ".", lambda t: t.n == 1242
    if name == "missing_level":
        _write(folder, "t.csv", "A,B,count\nx,p,3\nx,,1\ny,p,2\ny,,5\n")
        return {"file": "t.csv", "missing_level": "none"}, "none", lambda t: t.levels[1] == ("none", "p")
    raise AssertionError(f"no case for the input setting {name}")


@pytest.mark.parametrize("name", INPUT_SETTING_NAMES)
def test_every_input_setting_is_read_from_a_batch_dataset(name, tmp_path):
    from tabrelease.workflow import read_source

    try:
        entry, value, check = _input_case(name, tmp_path)
        init_ledger(tmp_path / "ledger.json")
        batch = read_spec(_batch(tmp_path, {"epsilon": 1.0, "out": "r", "simulate": True}, entry))
        source = batch.datasets["data"].source
        stored = getattr(source, name)
        assert stored == value, stored
        table = read_source(source)
        assert check(table), (table.variables, table.levels, table.counts.tolist())
    finally:
        while _CLUSTERS:
            _CLUSTERS.pop().close()


_CLUSTERS = []  # Dask clusters a case started (closed by the test)


def test_a_semicolon_separated_latin_1_file_is_released_by_a_batch(tmp_path):
    _write(tmp_path, "t.csv", "sex;r\u00e9gion;count\nf;nord;3\nf;s\u00fcd;1\nm;nord;2\nm;s\u00fcd;5\n",
           encoding="latin-1")
    init_ledger(tmp_path / "ledger.json")
    batch = read_spec(_batch(tmp_path, {"epsilon": 1.0, "margins": "[AB]", "out": "r", "simulate": True, "seed": 3},
                             {"file": "t.csv", "sep": "semicolon", "encoding": "latin-1"}))
    assert [s.status for s in dry_run(batch).steps] == ["would be made"]
    assert [s.status for s in run_batch(batch).steps] == ["made"]
    public = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    names = [v["name"] for v in public["variables"]]
    assert names == ["sex", "r\u00e9gion"]


# --- d. every setting in a sweep ------------------------------------------------------------------------------------
# Per setting a sweep holds fixed: its flags (with a mechanism it applies to) and what sweep.json must record.
SWEEP_CASES = {
    "delta": (["--delta", "1e-6"], lambda s: s["delta"] == 1e-6),
    "neighbours": (["--neighbours", "replace"],
                   lambda s: s["neighbours"] == "replace" and s["spec"]["unit"]["kind"] == "replace"),
    "sensitive": (["--mechanisms", "sensitive-attributes", "--neighbours", "replace", "--sensitive", "A"],
                  lambda s: s["spec"]["unit"]["kind"] == "sensitive-attributes"
                  and s["spec"]["unit"]["attributes"] == ["A"]),
    "public_total": (["--public-total"], lambda s: s["spec"]["options"] == {"public_total": True}),
    "plan_objective": (["--plan-objective", "max-cell-variance"],
                       lambda s: s["spec"]["options"] == {"plan_objective": "max-cell-variance"}),
    "plan_candidates": (["--plan-candidates", "closure"],
                        lambda s: s["spec"]["options"] == {"plan_candidates": "closure"}),
    "nonneg_t": (["--mechanisms", "nonneg", "--nonneg-t", "3"], lambda s: s["spec"]["options"] == {"nonneg_t": 3.0}),
    "estimator": (["--mechanisms", "auto", "--estimator", "least-squares"],
                  lambda s: s["spec"]["estimator"] == "least-squares"),
    "rounding": (["--rounding", "nearest"], lambda s: s["spec"]["rounding"] == "nearest"),
}


@pytest.mark.unit
def test_the_sweep_cases_cover_every_setting_a_sweep_holds_fixed():
    assert set(SWEEP_CASES) == set(SETTING_NAMES) - set(SWEEP_VARIES)


def _sweep(out, *extra):
    return main(["sweep", "edwards", "--epsilons", "1", "--repetitions", "1", "--out", str(out), "--jobs", "1",
                 "--quiet", *extra])


@pytest.mark.parametrize("name", sorted(SWEEP_CASES))
def test_every_setting_a_sweep_holds_fixed_is_recorded_in_its_grid(name, tmp_path, capsys):
    args, recorded = SWEEP_CASES[name]
    assert _sweep(tmp_path / "s", *args) == 0, capsys.readouterr().err
    saved = json.loads((tmp_path / "s" / "sweep.json").read_text())
    assert recorded(saved), saved
    assert saved["noise_mode"] == "simulation"
    # Not given, the grid records the defaults.
    assert _sweep(tmp_path / "plain") == 0
    plain = json.loads((tmp_path / "plain" / "sweep.json").read_text())
    assert not recorded(plain)


def test_a_sweep_without_mechanisms_runs_planned(tmp_path, capsys):
    assert _sweep(tmp_path / "s", "--repetitions", "2") == 0, capsys.readouterr().err
    runs = pd.read_csv(tmp_path / "s" / "runs.csv")
    assert len(runs) == 2 and set(runs.mechanism) == {"planned"}
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["mechanisms"] == ["planned"]


# --- e. an internal error ---------------------------------------------------------------------------------------------
def test_an_unexpected_exception_is_one_line_naming_its_type_only(tmp_path, capsys, monkeypatch):
    import tabrelease.workflow as workflow

    def broken(*args, **kwargs):
        raise RuntimeError("secret 12345")

    monkeypatch.setattr(workflow, "plan_release", broken)
    ledger = init_ledger(tmp_path / "ledger.json")
    before = ledger.read_bytes()
    code = main(["release", "czech", "--epsilon", "1", "--simulate", "--ledger", str(ledger),
                 "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err.startswith("tabrelease: internal error") and err.count("\n") == 1
    assert "RuntimeError" in err and "secret" not in err and "12345" not in err
    # It came before the charge: nothing charged, nothing written.
    assert ledger.read_bytes() == before and not (tmp_path / "r").exists()


@pytest.mark.parametrize("options, said", [
    ({"public_total": "no"}, "the option public_total is a switch: True or False, not 'no'"),
    ({"public_total": 0}, "the option public_total is a switch: True or False, not 0"),
    ({"plan_objective": "smallest"}, "the option plan_objective is one of total-squared-error, max-cell-variance"),
    ({"plan_candidates": "every"}, "the option plan_candidates is one of"),
])
def test_a_mechanism_option_the_command_line_could_not_give_is_refused(options, said):
    """A new user's trial: options={"public_total": "no"} was taken as true, and the release published the exact
    total n under a weaker guarantee. The settings that are options take only what their flags can give."""
    with pytest.raises(TabreleaseError, match=re.escape(said)):
        ReleaseSpec(loss=loss_of(1.0), options=options)
    # The switch's own values are taken, and a mechanism's own options are left to its plan.
    assert ReleaseSpec(loss=loss_of(1.0), options={"public_total": False}).option("public_total") is False
    assert ReleaseSpec(loss=loss_of(1.0), mechanism="rap", options={"rounds": 2}).option("rounds") == 2


def test_a_margin_given_by_a_program_in_any_order_or_by_names_for_people_is_one_margin():
    """A new user's trial: margins=[("ethnicity", "tenure")] and [("tenure", "ethnicity")] gave different plan scales
    and published counts for one seed; [["home_zone", "work_zone"]] (journey to work's names for people) was refused;
    [["A", "A"]] became [A] where "[AA]" is refused."""
    from tabrelease import release_margins

    table = builtin_table("rochdale")

    def released(margins):
        release = release_margins(table, ReleaseSpec(loss=loss_of(1.0), margins=margins, mode="simulation", seed=11))
        return release.plan.margins, [np.asarray(m).tolist() for m in release.released_margins]

    assert released([(1, 0), (3, 1, 2)]) == released([(0, 1), (1, 2, 3)]) == released("[AB][BCD]")
    journey = builtin_table("journey_to_work")
    spec = ReleaseSpec(loss=loss_of(1.0), margins=[["home_zone", "work_zone"]], mode="simulation", seed=1)
    assert release_margins(journey, spec).plan.margins == ((0, 1),)
    assert journey.margin(["home_zone"]).shape == (journey.shape[0],)
    for twice, said in (([["A", "A"]], "the margin ['A', 'A'] names a variable twice"),
                        ([(2, 2)], "the margin [2, 2] names a variable twice")):
        with pytest.raises(TabreleaseError, match=re.escape(said)):
            release_margins(table, ReleaseSpec(loss=loss_of(1.0), margins=twice, mode="simulation", seed=1))


def test_the_planner_takes_a_margin_s_axes_in_the_table_s_order_and_refuses_one_twice():
    from tabrelease import plan_release

    spec = ReleaseSpec(loss=loss_of(1.0))
    one, other = plan_release((2, 3, 2), [(2, 0), (1,)], spec), plan_release((2, 3, 2), [(0, 2), (1,)], spec)
    assert one.margins == other.margins == ((0, 2), (1,)) and one.calibration == other.calibration
    with pytest.raises(TabreleaseError, match=re.escape("the margin (1, 1) names an axis twice")):
        plan_release((2, 3, 2), [(1, 1)], spec)
