"""public/ holds the DP output and the release parameters, and nothing else (issue: governance).

Every file under public/ of a release is inspected. The allowed files are the released margins
(one CSV each) and release.json; release.json may hold only parameter keys (an allow-list), and
no file may carry what only the confidential table knows: n, the true margins, G2, the LP's b*,
the disclosure-risk counts, the released table w'.
"""

import json

import numpy as np
import pandas as pd
import pytest

from tabrelease import TabreleaseError, builtin_table
from tabrelease.cli import main
from tabrelease.schemas import RELEASE, load_schema, validate
from tabrelease.tables import margin_counts

def _schema_keys(schema, prefix=""):
    """Every key path the release schema allows: the schema is the allow-list of public/."""
    for key, sub in schema.get("properties", {}).items():
        yield f"{prefix}/{key}"
        yield from _schema_keys(sub, f"{prefix}/{key}")
    if isinstance(schema.get("items"), dict):
        yield from _schema_keys(schema["items"], f"{prefix}[]")


ALLOWED_KEYS = set(_schema_keys(load_schema(RELEASE)))
FORBIDDEN_WORDS = ("g2", "b_star", "lp_b", "n_released", "true_", "original", "disclosure", "audit", "mle",
                   "l1_error", "count_1", "smallest")


def _workbook_text(path) -> str:
    from openpyxl import load_workbook

    book = load_workbook(path)
    return " ".join(str(v) for sheet in book for row in sheet.iter_rows(values_only=True) for v in row
                    if v is not None).lower()


def _keys(value, prefix=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{prefix}/{k}"
            yield from _keys(v, f"{prefix}/{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v, f"{prefix}[]")


@pytest.mark.parametrize("name, extra", [
    ("edwards", []), ("journey_to_work", []), ("czech", ["--mechanism", "gaussian", "--delta", "1e-6"]),
    ("rochdale", ["--calibration", "paper", "--mechanism", "auto"]), ("czech", ["--delta", "1e-6"]),
    ("rochdale", ["--mechanism", "fourier"]), ("edwards", ["--public-total"]), ("journey_to_work", ["--mechanism", "binary-encoding"]),
    ("czech", ["--mechanism", "margins"]), ("edwards", ["--mechanism", "nonneg"]),
    ("housing", ["--xlsx"]),
])
def test_public_holds_only_dp_output_and_parameters(name, extra, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["release", name, "--epsilon", "0.7", "--simulate", "--seed", "5", "--out", str(out), *extra]) == 0
    capsys.readouterr()
    table = builtin_table(name)
    audit = json.loads((out / "internal" / "audit.json").read_text())
    public_files = sorted(p.relative_to(out / "public").as_posix() for p in (out / "public").rglob("*"))
    release = json.loads((out / "public" / "release.json").read_text())
    expected = sorted(["release.json"] + [m["file"] for m in release["margins"]]
                      + ([release["workbook"]] if release.get("workbook") else []))
    assert public_files == expected
    assert bool(release.get("workbook")) == ("--xlsx" in extra)
    assert set(_keys(release)) <= ALLOWED_KEYS, set(_keys(release)) - ALLOWED_KEYS
    validate(release, RELEASE)
    for path in (out / "public").iterdir():
        text = _workbook_text(path) if path.suffix == ".xlsx" else path.read_text().lower()
        for word in FORBIDDEN_WORDS:
            assert word not in text, f"{path.name} mentions {word!r}"
    # The margin files hold the released margins, which are the DP output (not the true margins).
    true_differs = False
    for spec in release["margins"]:
        frame = pd.read_csv(out / "public" / spec["file"])
        labels = {v["name"]: v["label"] for v in release["variables"]}  # columns carry the names for people
        assert list(frame.columns) == [labels[v] for v in spec["variables"]] + ["count"]
        axes = [table.variables.index(v) for v in spec["variables"]]
        true = margin_counts(table.counts, axes).ravel()
        true_differs |= not np.array_equal(frame["count"].to_numpy(), true)
    assert true_differs
    if release.get("workbook"):
        # The workbook repeats the CSV files, sheet by sheet (as cross-tabs, with their sums), release.json's
        # description and the plan's margins of error: nothing more.
        from openpyxl import load_workbook

        from tabrelease.workbook import sheet_names

        from .helpers import read_crosstab

        book = load_workbook(out / "public" / release["workbook"])
        files = [m["file"] for m in release["margins"]]
        assert book.sheetnames == ["release"] + sheet_names(["notes.csv", *files])
        for sheet, file in zip(book.sheetnames[2:], files):
            _, *body = [line.split(",") for line in (out / "public" / file).read_text().splitlines()]
            assert read_crosstab(book[sheet])[0] == {tuple(row[:-1]): int(row[-1]) for row in body}
        planned = {e["margin"]: e["cell_sd"] for e in release["plan"]["expected_error"]}
        notes = {r[0]: r[2] for r in book["notes"].iter_rows(values_only=True) if r[0] in planned}
        assert notes == pytest.approx(planned)
        about = dict(book["release"].iter_rows(min_row=2, max_col=2, values_only=True))
        assert about["privacy"] == release["privacy"] and about["epsilon asked for"] == release["epsilon"]
    # What only the confidential table knows stays in internal/.
    assert audit["evaluation"]["n"] == table.n and "disclosure_risk" in audit
    assert not any(p.name == "released_table.csv" for p in (out / "public").iterdir())


@pytest.mark.unit
def test_sheet_names_are_valid_and_distinct():
    from tabrelease.workbook import SHEET_MAX, sheet_names

    files = ["a" * 40 + ".csv", "a" * 40 + "b.csv", "release.csv", "x[1]:y*z?.csv", "Release.csv"]
    names = sheet_names(files)
    assert len(set(n.lower() for n in names)) == len(names) and all(len(n) <= SHEET_MAX for n in names)
    assert not any(set(n) & set("[]:*?/\\") for n in names) and "release" not in [n.lower() for n in names]


@pytest.mark.parametrize("shape", [(3,), (2, 5), (4, 2, 3), (2, 3, 2, 2)])
def test_a_margin_s_sheet_extent_is_that_of_the_sheet_written(shape):
    """`sheet_extent`, which refuses before the charge a margin too large for Excel, against the sheet openpyxl holds
    once `_write_margin` has written that margin."""
    pytest.importorskip("openpyxl")
    from openpyxl import Workbook

    from tabrelease.workbook import _write_margin, sheet_extent

    variables = [{"name": f"v{i}", "levels": [f"l{j}" for j in range(k)]} for i, k in enumerate(shape)]
    sheet = Workbook().active
    _write_margin(sheet, {"label": "[m]"}, variables, np.arange(np.prod(shape)).reshape(shape), None, "notes")
    assert sheet_extent(shape) == (sheet.max_row, sheet.max_column)


def test_a_margin_too_wide_or_too_long_for_excel_is_refused_before_the_charge(tmp_path, capsys, monkeypatch):
    """A review's trial: a two-way margin of 2 x 19,000 levels with --xlsx was charged, then failed (openpyxl names
    no column past 18,278), at every retry; one of 16,385 columns was written, which Excel cannot open. Refused
    now before the charge, in one line; a margin of 16,382 levels across is written."""
    pytest.importorskip("openpyxl")
    monkeypatch.chdir(tmp_path)
    assert main(["ledger", "init", "l.json"]) == 0
    assert main(["ledger", "l.json", "--set-budget", "wide", "--epsilon", "10"]) == 0
    capsys.readouterr()
    before = (tmp_path / "l.json").read_bytes()
    rows = [f"x{i},y{j},1" for i in range(2) for j in range(16_383)]
    (tmp_path / "wide.csv").write_text("a,b,count\n" + "\n".join(rows) + "\n")
    assert main(["release", "wide.csv", "--margins", "[a,b]", "--epsilon", "1", "--xlsx", "--simulate",
                 "--ledger", "l.json", "--dataset", "wide", "--out", "r"]) == 2
    err = capsys.readouterr().err
    assert "would have 16,385 columns (Excel holds 16,384)" in err and err.count("\n") == 1, err
    assert (tmp_path / "l.json").read_bytes() == before and not (tmp_path / "r").exists()
    # Rows: a margin this long is past the fit's own limits today, so the check is called on its shape.
    from tabrelease.workbook import check_workbook_fits

    check_workbook_fits([(2, 524_283, 2)])  # 1,048,576 rows: fits
    with pytest.raises(TabreleaseError, match=r"would have 1,048,578 rows \(Excel holds 1,048,576\)"):
        check_workbook_fits([(3,), (2, 524_284, 2)])
    (tmp_path / "fits.csv").write_text("a,b,count\n" + "\n".join(f"x{i},y{j},1" for i in range(2)
                                                                for j in range(16_382)) + "\n")
    assert main(["release", "fits.csv", "--margins", "[a,b]", "--epsilon", "1", "--xlsx", "--simulate",
                 "--ledger", "l.json", "--dataset", "wide", "--out", "r"]) == 0
    capsys.readouterr()


def test_xlsx_without_openpyxl_is_refused_before_the_charge(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "openpyxl", None)
    monkeypatch.chdir(tmp_path)
    assert main(["ledger", "init", "l.json"]) == 0
    capsys.readouterr()
    before = (tmp_path / "l.json").read_bytes()
    assert main(["release", "czech", "--epsilon", "1", "--xlsx", "--ledger", "l.json", "--out", "r"]) == 2
    err = capsys.readouterr().err
    assert "tabrelease[excel]" in err and err.count("\n") == 1
    assert (tmp_path / "l.json").read_bytes() == before and not (tmp_path / "r").exists()


@pytest.mark.e2e
@pytest.mark.parametrize("inside", ["public/nested", "internal/nested", "public"])
def test_a_release_inside_another_bundle_is_refused_before_its_charge(inside, tmp_path, capsys):
    """A new user's trial: `--out first/public/nested` was accepted, and the second release's internal audit sat in
    the first's public/ (its seal broken). Refused in one line, nothing written, nothing charged; through a link to
    the bundle's public/ too."""
    ledger = tmp_path / "ledger.json"
    assert main(["ledger", "init", str(ledger)]) == 0
    assert main(["ledger", str(ledger), "--set-budget", "rochdale", "--epsilon", "5"]) == 0
    first = tmp_path / "first"
    assert main(["release", "rochdale", "--epsilon", "1", "--out", str(first), "--ledger", str(ledger),
                 "--dataset", "rochdale"]) == 0
    capsys.readouterr()
    before = sorted(p.relative_to(first) for p in first.rglob("*"))
    (tmp_path / "link").symlink_to(first / "public")
    for out in (first / inside, tmp_path / "link" / "nested"):
        assert main(["release", "rochdale", "--epsilon", "1", "--out", str(out), "--ledger", str(ledger),
                     "--dataset", "rochdale"] + (["--force"] if inside == "public" else [])) == 2
        err = capsys.readouterr().err
        assert f"is inside the release bundle {first.resolve()}" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.relative_to(first) for p in first.rglob("*")) == before
    assert main(["ledger", str(ledger), "--json"]) == 0
    (dataset,) = json.loads(capsys.readouterr().out)["datasets"]
    assert (dataset["releases"], dataset["epsilon_spent"]) == (1, 1.0)
    assert main(["ledger", "verify", str(ledger), "--bundles", str(first)]) == 0


def test_a_copy_of_a_bundle_s_public_folder_is_a_bundle_s_and_an_unreadable_folder_is_not(tmp_path, monkeypatch):
    """A review's trials: a release's --out inside a copy of a bundle's public/ (deployed to a web root) was
    accepted, its internal audit then in the published folder; and a folder above the --out with public/ and an
    internal/ this user may not search refused every release ("Permission denied")."""
    import shutil
    from pathlib import Path

    from tabrelease import bundle

    first = tmp_path / "first"
    assert main(["release", "rochdale", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(first)]) == 0
    shutil.copytree(first / "public", tmp_path / "site")
    assert bundle.enclosing_bundle(tmp_path / "site" / "r2") == (tmp_path / "site").resolve()
    with pytest.raises(TabreleaseError, match="is inside the release bundle .*site: a bundle's public/ \\(or a copy"):
        bundle.check_release_destination(tmp_path / "site" / "r2", False)
    srv = tmp_path / "srv"
    for name in ("public", "internal", "data"):
        (srv / name).mkdir(parents=True)
    real_is_file = Path.is_file

    def unsearchable(self):
        if self.parent == srv / "internal":
            raise PermissionError(13, "Permission denied")
        return real_is_file(self)

    monkeypatch.setattr(Path, "is_file", unsearchable)
    assert bundle.enclosing_bundle(srv / "data" / "r1") is None


def test_internal_is_owner_only_itself(tmp_path):
    """A reviewer's trial: internal/ was 0755 and its audit and released table 0644, protected only by the bundle's
    0700 folder, so opening that folder up to publish public/ exposed them. internal/ and everything in it are
    owner-only themselves."""
    out = tmp_path / "r"
    assert main(["release", "czech", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(out)]) == 0
    internal = out / "internal"
    assert internal.stat().st_mode & 0o777 == 0o700
    files = [p for p in internal.rglob("*") if p.is_file()]
    assert files and all(p.stat().st_mode & 0o777 == 0o600 for p in files), [oct(p.stat().st_mode) for p in files]
    assert {"audit.json", "audit.html", "released_table.csv"} <= {p.name for p in files}


def test_warnings_that_read_the_true_counts_are_in_the_audit_and_neither_shown_nor_counted_on_the_terminal(tmp_path, capsys):
    """A reviewer's trial: "the released total n' is more than 10% away from the true n" and "N categories that exist
    in the data were released as zero" went to the terminal and --json, which end up in logs. They are the audit's;
    the terminal says where they are, not how many. (Edwards at epsilon 0.05, seed 1: both arise.)"""
    out = tmp_path / "r"
    assert main(["release", "edwards", "--epsilon", "0.05", "--simulate", "--seed", "1", "--out", str(out),
                 "--json"]) == 0
    captured = capsys.readouterr()
    said = json.loads(captured.out)["warnings"]
    notes = json.loads((out / "internal" / "audit.json").read_text())["notes"]
    confidential = [n for n in notes if "true n" in n or "exist in the data" in n]
    assert len(confidential) == 2
    assert not [w for w in said if "confidential" in w]
    for text in (captured.out, captured.err):
        assert "true n" not in text and "exist in the data" not in text
    # A review's trial: the number of such warnings read the true counts too ("2 warnings" at seeds 1 and 3, "1" at
    # seed 2, whose audit had no category released empty). The terminal's words are the same whatever they are.
    for seed in ("1", "2", "3"):
        assert main(["release", "edwards", "--epsilon", "0.05", "--simulate", "--seed", seed, "--out",
                     str(tmp_path / f"s{seed}"), "--json"]) == 0
        said = json.loads(capsys.readouterr().out)["warnings"]
        assert not [w for w in said if "confidential" in w or "warning" in w], said
