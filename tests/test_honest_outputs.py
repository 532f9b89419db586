"""Outputs say when a number is not what it seems: the nonneg lift, inconsistent margins, a refit that
did not converge, and the seed that replays every simulated release."""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

import tabrelease.evaluation
from tabrelease import ReleaseSpec, builtin_table, loss_of, release_margins
from tabrelease.cli import main


def _release(tmp_path, capsys, name, *extra):
    out = tmp_path / "r"
    code = main(["release", name, "--epsilon", "1", "--out", str(out), *extra])
    stdout = capsys.readouterr().out
    assert code == 0
    public = json.loads((out / "public" / "release.json").read_text())
    audit = json.loads((out / "internal" / "audit.json").read_text())
    return out, stdout, public, audit


def test_a_simulation_without_a_seed_records_one_that_replays_it(tmp_path, capsys):
    first = release_margins(builtin_table("rochdale"), ReleaseSpec(loss=loss_of(1.0), mode="simulation"))
    assert isinstance(first.noise_seed, int)
    again = release_margins(builtin_table("rochdale"),
                            ReleaseSpec(loss=loss_of(1.0), mode="simulation", seed=first.noise_seed))
    for a, b in zip(first.released_margins, again.released_margins):
        np.testing.assert_array_equal(a, b)
    # Two unseeded runs draw different seeds.
    assert release_margins(builtin_table("rochdale"), ReleaseSpec(loss=loss_of(1.0), mode="simulation")).noise_seed != first.noise_seed

    out, stdout, public, audit = _release(tmp_path, capsys, "czech", "--simulate")
    seed = audit["noise_seed"]
    assert isinstance(seed, int) and f"--seed {seed}" in stdout
    # Not published: with the released values the seed would give the noise back.
    assert "seed" not in public["noise"] and str(seed) not in (out / "public" / "release.json").read_text()
    replay = tmp_path / "replay"
    assert main(["release", "czech", "--epsilon", "1", "--simulate", "--seed", str(seed), "--out", str(replay)]) == 0
    for spec in public["margins"]:
        pd.testing.assert_frame_equal(pd.read_csv(out / "public" / spec["file"]),
                                      pd.read_csv(replay / "public" / spec["file"]))


def test_secure_noise_records_no_seed(tmp_path, capsys):
    _, _, public, audit = _release(tmp_path, capsys, "edwards")
    assert public["noise"]["mode"] == "release" and audit["noise_seed"] is None


@pytest.mark.parametrize("name, per_cell, cells", [
    # Edwards: scale |B| / 2^{k/2} = 12 / 8; shift t d scale = 5 * 12 * 1.5 = 90 on <f, chi^0>, and chi^0 = 2^{-3}.
    ("edwards", 90 / 8, 64),
    # Journey to work: scale 439/256; d = 169 components; the constant component f^0 is added to every cell.
    ("journey_to_work", 5 * 169 * 439 / 256, 256),
])
def test_nonneg_states_its_lift_everywhere(tmp_path, capsys, name, per_cell, cells):
    _, stdout, public, audit = _release(tmp_path, capsys, name, "--mechanism", "nonneg", "--simulate", "--seed", "2")
    assert public["parameters"]["shift_per_cell"] == pytest.approx(per_cell)
    assert public["parameters"]["shift_total"] == pytest.approx(per_cell * cells)
    lift = [w for w in public["warnings"] if "lifted on purpose" in w]
    assert len(lift) == 1 and f"{per_cell:.6g} per cell" in lift[0]
    assert lift[0] in stdout and lift[0] in audit["notes"]


def test_nonneg_on_efron_stein_components_is_reported_inconsistent(tmp_path, capsys):
    out, stdout, public, audit = _release(tmp_path, capsys, "journey_to_work", "--mechanism", "nonneg", "--simulate",
                                          "--seed", "2")
    totals = [pd.read_csv(out / "public" / spec["file"])["count"].sum() for spec in public["margins"]]
    # The released margins' own totals differ: no table has them all.
    assert max(totals) - min(totals) > 1
    assert public["consistent"] is False
    assert any("mutually inconsistent" in w for w in public["warnings"])
    assert "mutually inconsistent" in stdout
    assert audit["evaluation"]["mle_l1"] is None
    # Fourier coefficients of a binary table give consistent margins, noisy or not.
    rel = release_margins(builtin_table("czech"),
                          ReleaseSpec(loss=loss_of(0.3), mechanism="nonneg", mode="simulation", seed=2))
    assert rel.consistent


@pytest.mark.figures
def test_a_refit_that_did_not_converge_is_flagged(tmp_path, capsys, monkeypatch):
    evaluate = tabrelease.evaluation.evaluate_release

    def not_converged(*args, **kwargs):
        return dataclasses.replace(evaluate(*args, **kwargs), released_fit_converged=False)

    monkeypatch.setattr(tabrelease.evaluation, "evaluate_release", not_converged)
    out, stdout, _, audit = _release(tmp_path, capsys, "edwards", "--simulate", "--seed", "1")
    assert "refit of the model to the released margins did NOT converge" in stdout
    assert any("did NOT converge" in n for n in audit["notes"])
    assert "did NOT converge" in (out / "internal" / "audit.html").read_text()


def test_a_converged_refit_is_not_flagged(tmp_path, capsys):
    _, stdout, _, audit = _release(tmp_path, capsys, "edwards", "--simulate", "--seed", "1")
    assert audit["evaluation"]["released_fit_converged"] is True
    assert "did NOT converge" not in stdout
