"""The one catalogue of bad input: what a user can get wrong, and the message that must name the problem.

CLI_CASES run `tabrelease ...` in a fresh folder holding only the inputs the case prepared. Each must exit with
status 2, print nothing on stdout, and print one line on stderr that starts "tabrelease: error:", holds no
traceback and contains the case's message (an exact, case-sensitive substring that names the problem);
afterwards the folder must hold exactly those inputs, byte for byte (no output folder, no partial file, no
ledger entry, no temporary file).

API_CASES call the library directly: each must raise TabreleaseError with the case's message in it.

A problem reached the same way by several commands (the table loader is shared by every command) is listed
once; the cases that used to be spread over test_cli_fit, test_cli_release, test_mechanisms, test_tables,
test_models and test_sweeps are all here.
"""

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from tabrelease import ReleaseSpec, TabreleaseError, builtin_table, load_table, loss_of, parse_model, release_margins
from tabrelease import table_from_frame, table_from_microdata
from tabrelease.cli import main
from tabrelease.noise import noise_source
from tabrelease.sweeps import make_grid

GOOD = "A,B,count\n0,0,3\n0,1,1\n1,0,2\n1,1,5\n"


def _csv(text):
    return lambda d: (d / "t.csv").write_text(text)


def _ledger(text):
    return lambda d: (d / "ledger.json").write_text(text)


def _empty_release(d):
    # Edwards at epsilon 0.05, seed 12: a simulated release whose total came out 0 (every margin empty; a new user's
    # trial found `test` failing on it with an internal error).
    from tabrelease import publish_release

    publish_release(builtin_table("edwards"), ReleaseSpec(loss=loss_of(0.05), mode="simulation", seed=12), d / "e")


def _real_ledger(d):
    from tabrelease.ledger import init_ledger

    init_ledger(d / "L.json")  # keyed by $TABRELEASE_LEDGER_KEY: the ledger file and its anchor


def _nested_parquet(d):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"sex": ["f", "m", "f"], "age": [[1, 2], [3], [4]]}), d / "p.parquet")


def _read_only_ledger(d):
    _real_ledger(d)
    (d / "L.json").chmod(0o400)


# A release in release mode (secure noise) charged to a real ledger: each case must refuse before the charge, so the
# ledger is left byte for byte (these had been charged, then failed; found by a new user's trial of every option).
CHARGED = ["--ledger", "L.json", "--out", "o"]
MANY_RECORDS = "A,B,count\na,x,600000\na,y,500000\nb,x,1\nb,y,2\n"


def _labelled(labels):
    # Microdata of x, y, z and a metadata file giving x and y the labels (names for people) `labels`.
    def prepare(d):
        (d / "m.csv").write_text("x,y,z\n1,1,0\n1,1,1\n0,1,0\n0,0,1\n")
        variables = [{"name": v, "levels": ["0", "1"], **({"label": label} if label else {})}
                     for v, label in zip("xyz", [*labels, None])]
        (d / "meta.json").write_text(__import__("json").dumps({"variables": variables}))
    return prepare


SENSITIVE_OF_M = ["release", "m.csv", "--microdata", "--metadata", "meta.json", "--margins", "[x,y][y,z]",
                  "--epsilon", "1", "--mechanism", "sensitive-attributes", "--neighbours", "replace", "--simulate",
                  "--out", "o", "--sensitive"]


def _mkdir(name):
    return lambda d: (d / name).mkdir()


RELEASE_CZECH = ["release", "czech", "--epsilon", "1"]
DEEP_JSON = "[" * 100_000 + "]" * 100_000  # past what Python's recursive parsers follow


def _with_table(name, make):
    """The good table t.csv, and a side file `name` made by make(path)."""
    def prepare(d):
        (d / "t.csv").write_text(GOOD)
        make(d / name)
    return prepare


def _text(text):
    return lambda path: path.write_text(text)


def _count_csv(row, count):
    # The count of one data row replaced by `count`.
    lines = GOOD.splitlines()
    cells = lines[row].split(",")
    lines[row] = ",".join(cells[:-1] + [count])
    return lambda d: (d / "t.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _in_folder(folder, name, make):
    def prepare(d):
        (d / folder).mkdir()
        make(d / folder / name)
    return prepare


FIT_T = ["fit", "t.csv", "--model", "[A][B]"]

# (label, prepare the folder, argv, message)
CLI_CASES = [
    ("a release whose total is 0", _empty_release, ["test", "e", "--model", "[AB]", "--bootstrap", "20"],
     "the release's total is 0 (its margins are empty): there is nothing to test"),
    # files and tables (one loader for every command)
    ("missing file", None, ["fit", "missing.csv"], "no such file: missing.csv"),
    ("folder for a table", _mkdir("folder.csv"), ["fit", "folder.csv"], "folder.csv is a directory, not a CSV file"),
    ("unknown built-in name", None, ["release", "nosuchtable", "--epsilon", "1", "--out", "o"],
     "'nosuchtable' is neither a built-in table"),
    ("empty file", _csv(""), ["fit", "t.csv"], "t.csv is not a readable CSV table"),
    ("not a CSV (binary bytes)", lambda d: (d / "t.csv").write_bytes(b"\x00\xff\xfe\x00garbage"), ["fit", "t.csv"],
     "t.csv is not valid utf-8 text (line 1); if it was saved by Excel or an older system, try --encoding latin-1"),
    ("no count column", _csv("A,B,n\n0,0,1\n0,1,1\n1,0,1\n1,1,1\n"), ["fit", "t.csv"],
     "no count column 'count'; the file's first row has 3 fields, not shown: the first row is not known to be a header"),
    ("an empty epsilon in a list", None, ["plan", "czech", "--epsilon", "1,,2"], "'1,,2' has an empty value between commas"),
    ("negative count", _csv(GOOD.replace("0,0,3", "0,0,-3")), ["release", "t.csv", "--epsilon", "1", "--out", "o"],
     "a negative count in column 'count' (data row 1)"),
    ("fractional count", _csv(GOOD.replace("0,0,3", "0,0,2.5")), ["release", "t.csv", "--epsilon", "1", "--out", "o"],
     "a fractional count in column 'count' (data row 1): counts are whole numbers (one written with a thousands "
     "mark, as 1.286 for 1286? give --thousands)"),
    ("text count", _csv(GOOD.replace("0,0,3", "0,0,many")), ["fit", "t.csv"],
     "the count in column 'count' (data row 1) is not a number"),
    ("missing count", _csv(GOOD.replace("0,1,1", "0,1,")), ["fit", "t.csv", "--model", "[A]"],
     "missing count in column 'count' (data row 2)"),
    ("duplicate cell", _csv(GOOD + "1,1,2\n"), ["release", "t.csv", "--epsilon", "1", "--out", "o"],
     "a cell is listed more than once: data rows 4 and 5 describe the same cell (2 rows describe repeated cells)"),
    ("missing cell", _csv("A,B,count\n0,0,3\n0,1,1\n1,0,2\n"), ["release", "t.csv", "--epsilon", "1", "--out", "o"],
     "the long table lists 3 of 4 cells (1 missing)"),
    # One "hang" written "hnag" (a new user's trial with vcd's Suicide): the advice was --sparse, which published both.
    ("a misspelt level in a long table", _csv("sex,method,count\n" + "".join(
        f"{s},{'hnag' if (s, m) == ('m', 'hang') else m},{i}\n" for i, (s, m) in enumerate(
            (s, m) for s in "fmxyz" for m in ("hang", "gas", "jump")))),
     ["release", "t.csv", "--margins", "[sex,method]", "--epsilon", "1", "--simulate", "--out", "o"],
     "the long table lists 15 of 20 cells (5 missing); 'method' has a rare level whose rows fill in the cells another "
     "level lacks (a misspelt level? declare the levels with --levels); else list every cell"),
    ("one-level variable", _csv("A,B,count\n0,0,3\n0,1,1\n"), ["fit", "t.csv"],
     "variable 'A' has only one level"),
    ("microdata with a header and no rows", _csv("cyl,gear\n"),
     ["release", "t.csv", "--microdata", "--margins", "[cyl,gear]", "--epsilon", "1", "--simulate", "--out", "o"],
     "t.csv: the microdata have no rows"),
    # A long table read with --microdata was released as row counts (vcd's Suicide: n = 90 for 53,182 people).
    ("a long table read as microdata", _csv("sex,method,count\nf,a,10\nf,b,3\nm,a,7\nm,b,0\n"),
     ["release", "t.csv", "--microdata", "--variables", "sex,method", "--margins", "[sex,method]", "--epsilon", "1",
      "--out", "o"],
     "t.csv has a column 'count': with --microdata each row is one person and 'count' would be ignored. A long "
     "table (one row per cell, with its count)? Drop --microdata"),
    ("a long table read as microdata, every column", _csv("sex,method,n\nf,a,10\nf,b,3\nm,a,7\nm,b,0\n"),
     ["release", "t.csv", "--microdata", "--count-column", "n", "--margins", "[sex,method]", "--epsilon", "1",
      "--simulate", "--out", "o"],
     "t.csv has a column 'n': with --microdata each row is one person and 'n' would be counted as a variable"),
    ("a long table with a quote not closed", _csv('A,B,count\n0,0,3\n0,1,1\n"1,0,2\n1,1,4\n'),
     ["release", "t.csv", "--margins", "[A][B]", "--epsilon", "1", "--simulate", "--out", "o"],
     "t.csv: data row 3 has 1 fields where the header has 3 (is the separator ',' right, and every quote closed?)"),
    # Microdata, read by the streaming reader: the ragged row named by its line (Arrow does not know it; its text is
    # not quoted), as the in-memory reader names its data row. Line 5: a quoted field holds a line break, and a blank
    # line (skipped) comes before it.
    ("microdata with a short row", _csv("sex,age,region\nf,1,n\nm,2,s\nf,3\nm,1,n\n"),
     ["release", "t.csv", "--microdata", "--margins", "[sex,age]", "--epsilon", "1", "--simulate", "--out", "o"],
     "t.csv: line 4 has 2 fields where the header has 3 (is the separator ',' right, and every quote closed?)"),
    ("microdata with a long row after a quoted line break",
     _csv('sex,age,region\nf,1,n\n\n"m\nx",2,s\nf,3,n,extra\n'),
     ["release", "t.csv", "--microdata", "--margins", "[sex,age]", "--epsilon", "1", "--simulate", "--out", "o"],
     "t.csv: line 6 has 4 fields where the header has 3 (is the separator ',' right, and every quote closed?)"),
    ("no default model for a CSV", _csv(GOOD), ["fit", "t.csv"],
     "this table has no default model: name one with --model, e.g. '[A][B]' (its variables, by letter or name: A, B)"),
    ("no default model, named variables", _csv(GOOD.replace("A,B,", "sex,age,")), ["fit", "t.csv"],
     "e.g. '[sex][age]' (its variables, by letter or name: A (sex), B (age))"),
    ("no default model, three variables", _csv("x,y,z,count\n" + "".join(f"{i},{j},{k},1\n" for i in "01" for j in "01"
                                                                      for k in "01")), ["fit", "t.csv"],
     "e.g. '[x,y][x,z][y,z]' (its variables, by letter or name: A (x), B (y), C (z))"),
    ("no default model to plan for", _csv(GOOD), ["plan", "t.csv", "--epsilon", "1"],
     "the table t has no default model: name its margins, e.g. '[AB][BC]' or all-2-way, with --margins"),
    ("several tables, one without a model, in a sweep", _csv(GOOD),
     ["sweep", "rochdale", "t.csv", "--epsilons", "1", "--repetitions", "2", "--out", "o"],
     "the table t has no default model: name its margins, e.g. '[AB][BC]' or all-2-way, with --margins (release, "
     "plan, sweep)"),
    ("margins by name for several tables", _csv(GOOD),
     ["sweep", "rochdale", "t.csv", "--margins", "[AB]", "--epsilons", "1", "--repetitions", "2", "--out", "o"],
     "--margins names one table's variables, so it applies to a sweep over one table; sweep several tables with "
     "their paper models, or a workload such as all-2-way"),
    # side files (levels, metadata, batch specs): read whole, so pipes, devices and huge files are refused first
    ("a level listed twice in a levels file", _with_table("lv.json", _text('{"A": ["0", "1", "0"], "B": ["0", "1"]}')),
     [*FIT_T, "--levels", "lv.json"], "the levels file lv.json: variable 'A' lists the level '0' twice"),
    ("a levels file that is not JSON", _with_table("lv.json", _text('{"A": ["0", "1"] "B": ["0", "1"]}')),
     [*FIT_T, "--levels", "lv.json"],
     "the levels file lv.json is not valid JSON (Expecting ',' delimiter at line 1, column 18)"),
    ("a deeply nested levels file", _with_table("lv.json", _text(DEEP_JSON)), [*FIT_T, "--levels", "lv.json"],
     "the levels file lv.json nests too deeply to read"),
    ("a deeply nested metadata file", _with_table("meta.json", _text(DEEP_JSON)), [*FIT_T, "--metadata", "meta.json"],
     "the metadata file meta.json nests too deeply to read"),
    ("a deeply nested batch spec", lambda d: (d / "spec.toml").write_text("a = " + DEEP_JSON), ["batch", "spec.toml"],
     "the batch spec spec.toml nests too deeply to read"),
    ("a deeply nested ledger", _ledger(DEEP_JSON), ["ledger", "ledger.json"],
     "ledger.json is not a tabrelease ledger (it nests too deeply to read)"),
    ("a levels file that is a FIFO", _with_table("lv.json", lambda path: os.mkfifo(path)),
     [*FIT_T, "--levels", "lv.json"],
     "the levels file lv.json is not a regular file"),
    ("a levels file that is a device", _csv(GOOD), [*FIT_T, "--levels", "/dev/zero"],
     "the levels file /dev/zero is not a regular file"),
    ("a metadata file that is a FIFO", _with_table("meta.json", lambda path: os.mkfifo(path)),
     [*FIT_T, "--metadata", "meta.json"],
     "the metadata file meta.json is not a regular file"),
    ("a batch spec that is a FIFO", lambda d: os.mkfifo(d / "spec.toml"), ["batch", "spec.toml"],
     "the batch spec spec.toml is not a regular file"),
    ("a levels file past the size limit", _with_table("lv.json", _text(" " * (8 * 2**20 + 1))),
     [*FIT_T, "--levels", "lv.json"], "the levels file lv.json is larger than 8 MiB"),
    # counts: ASCII digits only (int() and Decimal() take more)
    ("a count with an underscore", _count_csv(1, "5_000"), FIT_T,
     "the count in column 'count' (data row 1) is not a number written in the digits 0-9"),
    ("a count in Arabic-Indic digits", _count_csv(2, "\u0665"), FIT_T,
     "the count in column 'count' (data row 2) is not a number written in the digits 0-9"),
    ("a count in fullwidth digits", _count_csv(3, "\uff15"), FIT_T,
     "the count in column 'count' (data row 3) is not a number written in the digits 0-9"),
    ("a count with a huge exponent", _count_csv(4, "1e999999999"), FIT_T,
     "the count in column 'count' (data row 4) is too large (above 2^63 - 1)"),
    # models and margins
    ("model names an unknown variable", None, ["fit", "czech", "--model", "[AZ]"], "model names unknown variable 'Z' in [AZ]"),
    ("margins name an unknown variable", None, ["release", "edwards", "--epsilon", "1", "--margins", "[AX]", "--out", "o"],
     "model names unknown variable 'X' in [AX]"),
    # by name among others: the table's variables by the names people read (czech's are letters, labelled), as the
    # answer to an unknown word alone is (a new user's trial read "variables A, B, ..." here)
    ("a named margin with an unknown variable", None, ["release", "czech", "--epsilon", "1", "--margins", "[A,Foo]",
                                                       "--out", "o"],
     "unknown variable 'Foo'; the table has variables smoking (A), mental (B), physical (C), pressure (D)"),
    ("malformed margins", None, [*RELEASE_CZECH, "--margins", "AB]", "--out", "o"], "cannot read model 'AB]'"),
    ("empty margin", None, ["fit", "czech", "--model", "[]"], "the model has an empty margin []"),
    ("empty model", None, ["fit", "edwards", "--model", ""], "the model is empty"),
    ("negative tolerance", None, ["fit", "edwards", "--tol", "-1"], "argument --tol: '-1' must be a positive finite number"),
    # privacy and mechanism parameters
    ("zero epsilon", None, ["release", "czech", "--epsilon", "0", "--out", "o"],
     "argument --epsilon: the value must be a positive finite number, not 0.0"),
    ("negative epsilon", None, ["release", "edwards", "--epsilon", "-2", "--out", "o"],
     "argument --epsilon: the value must be a positive finite number, not -2.0"),
    ("infinite epsilon", None, ["release", "edwards", "--epsilon", "inf", "--out", "o"],
     "argument --epsilon: the value must be a positive finite number, not inf"),
    ("NaN epsilon", None, ["release", "czech", "--epsilon", "nan", "--out", "o"],
     "argument --epsilon: the value must be a positive finite number, not nan"),
    ("text epsilon", None, ["release", "edwards", "--epsilon", "abc", "--out", "o"], "argument --epsilon: the value 'abc' is not a number"),
    ("Fourier on a non-binary table", None,
     ["release", "journey_to_work", "--epsilon", "1", "--mechanism", "fourier", "--out", "o"],
     "the Fourier mechanism needs an all-binary table; this one has levels [4, 4, 16]"),
    ("unknown mechanism", None, [*RELEASE_CZECH, "--mechanism", "magic", "--out", "o"], "unknown mechanism 'magic'"),
    ("delta without gaussian", None, [*RELEASE_CZECH, "--mechanism", "fourier", "--delta", "1e-6", "--out", "o"],
     "--delta applies to the planned, gaussian, gaussian-copula, copula-id and rap mechanisms only"),
    ("public total of a paper mechanism", None, [*RELEASE_CZECH, "--mechanism", "fourier", "--public-total", "--out", "o"],
     "--public-total does not apply to the fourier mechanism"),
    ("gaussian without delta", None, [*RELEASE_CZECH, "--mechanism", "gaussian", "--out", "o"],
     "the gaussian mechanism gives (epsilon, delta)-DP; give --delta"),
    ("delta of 1", None, [*RELEASE_CZECH, "--mechanism", "gaussian", "--delta", "1", "--out", "o"],
     "argument --delta: 1.0 must lie strictly between 0 and 1"),
    ("seed in release mode", None, [*RELEASE_CZECH, "--seed", "3", "--out", "o"],
     "release mode draws from a secure sampler and accepts no seed"),
    ("paper calibration of cells", None, [*RELEASE_CZECH, "--mechanism", "cells", "--calibration", "paper", "--out", "o"],
     "--calibration paper reproduces the Fourier and Efron-Stein mechanisms only"),
    ("bound delta out of range", None, [*RELEASE_CZECH, "--bound-delta", "1.5", "--out", "o"],
     "argument --bound-delta: 1.5 must lie strictly between 0 and 1"),
    ("output already there", _mkdir("o"), [*RELEASE_CZECH, "--out", "o"], "o already exists; choose another --out"),
    ("output inside a file", lambda d: (d / "afile").write_text("x"), [*RELEASE_CZECH, "--out", "afile/sub"],
     "the parent of afile/sub is a file, not a folder"),
    ("output in no folder", None, [*RELEASE_CZECH, "--out", "nowhere/sub"],
     "the parent folder of nowhere/sub does not exist"),
    # refused before the charge (each had been charged, then failed)
    ("an estimator needing the nonneg mechanism's lift", _real_ledger,
     ["release", "edwards", "--epsilon", "1", "--mechanism", "efron-stein", "--estimator", "shifted-synthesis",
      *CHARGED], "the shifted-synthesis estimator needs a plan with a lift t (the nonneg mechanism's)"),
    ("least squares over margins published exactly", _real_ledger,
     ["release", "edwards", "--epsilon", "1", "--mechanism", "sensitive-attributes", "--neighbours", "replace",
      "--sensitive", "A", "--estimator", "least-squares", *CHARGED],
     "the least-squares estimator takes only the total as exact, and this plan publishes the margins without a "
     "sensitive attribute exactly"),
    ("local least squares over margins published exactly", _real_ledger,
     ["release", "edwards", "--epsilon", "1", "--mechanism", "sensitive-attributes", "--neighbours", "replace",
      "--sensitive", "A", "--estimator", "local-least-squares", *CHARGED],
     "the local-least-squares estimator takes only the total as exact"),
    # A nested Parquet column: pandas had raised an internal error (TypeError), Arrow named its own error only.
    *[(f"a nested Parquet column ({engine})", _nested_parquet,
       ["release", "p.parquet", "--microdata", "--engine", engine, "--margins", "[sex,age]", "--epsilon", "1",
        "--simulate", "--out", "o"],
       "p.parquet: column 'age' holds list<element: int64> values (lists, records or maps)"
       + (": a microdata column holds one plain value per person" if engine == "arrow" else ""))
      for engine in ("arrow", "pandas")],
    # A ledger its owner made read-only was charged anyway (the rename replaced it, 0600 again): a new user's trial.
    ("a read-only ledger", _read_only_ledger, ["release", "titanic", "--epsilon", "1", *CHARGED],
     "L.json is read-only (its owner may not write it): make it writable to charge it or set a budget; nothing is "
     "spent or set"),
    ("an epsilon past e^epsilon's range", _real_ledger, ["release", "titanic", "--epsilon", "800", *CHARGED],
     "a release's epsilon must lie between 1e-06 and 700, not 800.0"),
    ("an epsilon past a float's arithmetic", _real_ledger, ["release", "titanic", "--epsilon", "1e-7", *CHARGED],
     "a release's epsilon must lie between 1e-06 and 700, not 1e-07"),
    ("a Gaussian whose epsilon cannot be solved for", _real_ledger,
     ["release", "titanic", "--epsilon", "1e-6", "--mechanism", "gaussian", "--delta", "0.5", *CHARGED],
     "the Gaussian's epsilon at delta 0.5 could not be solved for at epsilon 1e-06"),
    ("a delta lost in subnormal floats", _real_ledger,
     ["release", "titanic", "--epsilon", "1", "--mechanism", "gaussian", "--delta", "1e-310", *CHARGED],
     "a release's delta must be at least 1e-300"),
    ("a bound's delta lost in subnormal floats", _real_ledger,
     ["release", "titanic", "--epsilon", "1", "--bound-delta", "5e-324", *CHARGED],
     "--bound-delta must be at least 1e-300"),
    ("randomized response of too many records, secure", lambda d: (_real_ledger(d), _csv(MANY_RECORDS)(d)),
     ["release", "t.csv", "--margins", "[A][B]", "--mechanism", "randomized-response", "--epsilon", "1", *CHARGED],
     "randomized response in release mode draws each record in turn through the secure sampler, and this table has "
     "more than 1,000,000"),
    # a sensitive attribute named by a word that names two variables: the wrong one would go unprotected
    ("a sensitive word that is one variable's name and another's label", _labelled(["y", "x"]),
     [*SENSITIVE_OF_M, "y"], "--sensitive 'y' could name x (letter A, called 'y') or y (letter B, called 'x')"),
    ("a sensitive word that is a letter and another variable's label", _labelled(["B", None]),
     [*SENSITIVE_OF_M, "B"], "--sensitive 'B' could name x (letter A, called 'B') or y (letter B, called 'y')"),
    # two variables of one name for people are refused as the metadata is read (their files' columns would clash)
    ("two variables' labels alike", _labelled(["age", "age"]),
     [*SENSITIVE_OF_M, "age"], "gives two variables the name 'age' for people (the published files name their columns"),
    ("a variable labelled as the count column", _labelled(["count", None]),
     [*SENSITIVE_OF_M, "x"], "names a variable 'count' for people, the name of the CSV files' count column"),
    # ledger
    ("ledger is a folder", _mkdir("ledger.json"), [*RELEASE_CZECH, "--ledger", "ledger.json", "--out", "o"],
     "ledger.json is a directory; give a file path"),
    ("ledger is not JSON", _ledger("not json"), [*RELEASE_CZECH, "--ledger", "ledger.json", "--out", "o"],
     "ledger.json is not a tabrelease ledger (not valid JSON)"),
    ("ledger of another format", _ledger('{"version": 99}'), ["ledger", "ledger.json"],
     "ledger.json is not a tabrelease ledger of version 2 or 3 (it has another version)"),
    ("ledger without a version", _ledger('{"records": []}'), ["ledger", "ledger.json"],
     "ledger.json is not a tabrelease ledger (its JSON has no ledger's version field); give the path of a ledger"),
    ("ledger that is a list", _ledger("[1, 2, 3]"), ["ledger", "ledger.json"],
     "ledger.json is not a tabrelease ledger (its JSON is a list or a value, not a ledger)"),
    ("ledger in a missing folder", None, [*RELEASE_CZECH, "--ledger", "nowhere/l.json", "--out", "o"],
     "/nowhere does not exist"),
    ("no ledger to show", None, ["ledger", "missing.json"], "missing.json; make one with `tabrelease ledger init"),
    # an epsilon past the releasable range: planning overflowed, and a sweep failed mid-way leaving files (a trial)
    ("plan at a vanishing epsilon", None, ["plan", "czech", "--epsilon", "1e-160"],
     "plan takes an epsilon between 1e-100 and 1e+100 (past them its arithmetic fails), not 1e-160"),
    ("sweep at a vanishing epsilon", None, ["sweep", "czech", "--epsilons", "1e-300", "--repetitions", "1", "--out",
                                            "swx"], "a release's epsilon must lie between 1e-06 and 700, not 1e-300"),
    # an option the action does not read (it had been ignored silently: a new user's trial)
    ("verify with --releases", _real_ledger, ["ledger", "verify", "L.json", "--releases"],
     "--releases does not go with `ledger verify FILE` (list releases with `ledger FILE --releases`)"),
    ("init with a budget", None, ["ledger", "init", "M.json", "--epsilon", "1"],
     "--epsilon does not go with `ledger init FILE`"),
    ("budget without epsilon", None, ["ledger", "l.json", "--set-budget", "czech"], "--set-budget needs --epsilon"),
    ("negative budget", None, ["ledger", "l.json", "--set-budget", "czech", "--epsilon", "-1"],
     "argument --epsilon: '-1' must be a positive finite number"),
    # a levels file naming other variables (a typo) left a sparse table's release refused with no word of which (a
    # new user's trial): the refusal names the undeclared variables and the file's names the table lacks
    ("levels file of other variables", _with_table("lv.json", _text('{"a": ["0", "1"], "bb": ["0", "1"]}')),
     ["release", "t.csv", "--sparse", "--levels", "lv.json", "--margins", "[A,B]", "--epsilon", "1", "--out", "o"],
     "(undeclared: A, B); the levels file declares a, bb, which the table does not have"),
    # a delta lost in subnormal floats gave rho NaN and an internal error (a reviewer's trial), as a release refuses it
    ("subnormal budget delta", _real_ledger, ["ledger", "L.json", "--set-budget", "czech", "--accounting", "zcdp",
                                               "--epsilon", "1", "--delta", "1e-320"],
     "a budget delta must be 0 or at least 1e-300, not 1e-320"),
    ("subnormal basic budget delta", _real_ledger, ["ledger", "L.json", "--set-budget", "czech", "--epsilon", "1",
                                                     "--delta", "1e-310"],
     "a budget delta must be 0 or at least 1e-300, not 1e-310"),
    # sweeps and the reproduction
    ("bad epsilon grid", None, ["sweep", "czech", "--epsilons", "0.1:0.05:0.01", "--repetitions", "2", "--out", "s"],
     "argument --epsilons: '0.1:0.05:0.01': START:STOP:STEP runs up from START to below STOP by a positive STEP"),
    ("unreadable epsilon grid", None, ["sweep", "czech", "--epsilons", "0.1:x:0.01", "--repetitions", "2", "--out",
                                       "s"],
     "argument --epsilons: '0.1:x:0.01' is not a comma list of numbers or START:STOP:STEP"),
    ("zero repetitions", None, ["sweep", "czech", "--epsilons", "1", "--repetitions", "0", "--out", "s"],
     "argument --repetitions: '0' must be at least 1"),
    ("repetitions past the limit", None,
     ["sweep", "czech", "--epsilons", "1", "--repetitions", "1000000000000", "--out", "s"],
     "1,000,000,000,000 repetitions are more than 10,000, the most a sweep runs of each grid point"),
    ("an epsilon range past the limit", None,
     ["sweep", "czech", "--epsilons", "0.001:1000:0.0001", "--repetitions", "2", "--out", "s"],
     "'0.001:1000:0.0001' gives more than 10,000 epsilons, the most one grid may have"),
    ("a sweep of too many runs", None, ["sweep", "czech", "--epsilons", "0.01:100:0.01", "--repetitions", "200",
                                        "--out", "s"], "more than 1,000,000, the most one sweep runs: split it"),
    ("frontier repetitions past the limit", None, ["frontier", "--repetitions", "1000000000", "--out", "f"],
     "--repetitions 1,000,000,000 is more than 10,000"),
    # a frontier of a table read from a file: it has no paper model, and its workloads need enough variables
    ("frontier model of a file's table", _csv(GOOD), ["frontier", "--tables", "t.csv", "--out", "f"],
     "t has no default model, so no model workload: choose the workloads all-2-way or all-3-way"),
    ("frontier three-way margins of a two-way table", _csv(GOOD),
     ["frontier", "--tables", "t.csv", "--workloads", "all-3-way", "--out", "f"],
     "the all-3-way workload needs a table of at least 3 variables; t has 2"),
    ("frontier of a missing file", None, ["frontier", "--tables", "nosuch.csv", "--out", "f"],
     "'nosuch.csv' is neither a built-in table (edwards,"),
    ("frontier of two files of one name", _in_folder("d", "t.csv", _text(GOOD)),
     ["frontier", "--tables", "d/t.csv,d/./t.csv", "--workloads", "all-2-way", "--out", "f"],
     "the frontier's tables include 't' twice; name each table once"),
    ("frontier of a file missing a cell", _csv("A,B,count\n0,0,3\n0,1,1\n1,0,2\n"),
     ["frontier", "--tables", "t.csv", "--workloads", "all-2-way", "--out", "f"],
     "the long table lists 3 of 4 cells (1 missing); list every cell, zeros included, or say the table is sparse"),
    ("frontier of a file that is not text", lambda d: (d / "t.csv").write_bytes(b"\xc3\x28\x01garbage\x80"),
     ["frontier", "--tables", "t.csv", "--workloads", "all-2-way", "--out", "f"],
     "t.csv is not valid utf-8 text (line 1); if it was saved by Excel or an older system, try --encoding"),
    ("frontier of a folder", lambda d: (d / "t.csv").mkdir(), ["frontier", "--tables", "t.csv", "--out", "f"],
     "'t.csv' is neither a built-in table (edwards,"),
    ("frontier of a file named as a built-in table", lambda d: (d / "czech.csv").write_text(GOOD),
     ["frontier", "--tables", "czech.csv", "--workloads", "all-2-way", "--out", "f"],
     "a table from a file is named 'czech', as a built-in table is: rename the file"),
    ("frontier of a sensitive strategy on a file", _csv(GOOD),
     ["frontier", "--tables", "t.csv", "--workloads", "all-2-way", "--strategies", "sensitive-attributes", "--out",
      "f"], "none of the chosen strategies runs on these tables"),
    ("frontier of an unknown workload", None, ["frontier", "--tables", "edwards", "--workloads", "all-4-way",
                                               "--out", "f"],
     "unknown frontier workload 'all-4-way'; choose from model, all-2-way, all-3-way"),
    ("resume of a damaged sweep", _in_folder("s", "sweep.json", lambda path: path.write_text("not json")),
     ["sweep", "czech", "--epsilons", "1", "--repetitions", "2", "--out", "s", "--resume"],
     "sweep.json is not a sweep's description (not valid JSON)"),
    ("resume of a sweep whose description is a FIFO", _in_folder("s", "sweep.json", lambda path: os.mkfifo(path)),
     ["sweep", "czech", "--epsilons", "1", "--repetitions", "2", "--out", "s", "--resume"],
     "sweep.json is not a regular file"),
    ("resume of nothing", None, ["sweep", "czech", "--epsilons", "1", "--repetitions", "2", "--out", "s", "--resume"],
     "nothing to resume in s: it has no sweep.json"),
    ("resume and force", None, ["reproduce", "--quick", "--out", "p", "--resume", "--force"],
     "--resume and --force contradict each other"),
    ("unreachable Dask scheduler", None,
     ["sweep", "czech", "--epsilons", "1", "--repetitions", "1", "--out", "s", "--scheduler", "tcp://127.0.0.1:9"],
     "cannot reach the Dask scheduler at tcp://127.0.0.1:9"),
]


def _frame(counts):
    return pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "q", "p", "q"], "count": counts})


def _release(epsilon, delta=None, **settings):
    # The spec is built inside the call: its checks (epsilon, delta) are among those the case expects.
    return lambda: release_margins(builtin_table("journey_to_work"),
                                   ReleaseSpec(loss=loss_of(epsilon, delta), mode="simulation", **settings))


def _model(spec):
    return lambda: parse_model(spec, builtin_table("edwards"))


def _grid(tables=("journey_to_work",), epsilons=(1.0,), repetitions=2, **kwargs):
    return lambda: make_grid([builtin_table(t) for t in tables], epsilons, repetitions, **kwargs)


# (label, call, message)
API_CASES = [
    # tables
    ("negative count", lambda: table_from_frame(_frame(["1", "-2", "3", "4"])), "a negative count in column 'count' (data row 2)"),
    ("fractional count", lambda: table_from_frame(_frame(["1", "2.5", "3", "4"])), "a fractional count in column 'count' (data row 2)"),
    ("count above 2^63", lambda: table_from_frame(_frame(["1", str(2**63), "3", "4"])), "is too large (above 2^63 - 1)"),
    ("counts adding past 2^63", lambda: table_from_frame(_frame(["1", str(2**62), str(2**62), "4"])),
     "add up to more than 2^63 - 1"),
    ("missing count", lambda: table_from_frame(_frame(["1", "", "3", "4"])), "missing count in column 'count'"),
    ("text count", lambda: table_from_frame(_frame(["1", "abc", "3", "4"])), "the count in column 'count' (data row 2) is not a number"),
    ("duplicate cell", lambda: table_from_frame(
        pd.DataFrame({"a": ["x", "x", "y", "y"], "b": ["p", "p", "p", "q"], "count": [1, 2, 3, 4]})),
     "a cell is listed more than once: data rows 1 and 2 describe the same cell"),
    ("duplicate column names", lambda: table_from_frame(_frame([1, 2, 3, 4]).set_axis(["a", "a", "count"], axis=1)),
     "the table: columns 1 and 2 have the same name"),
    ("one-level variable", lambda: table_from_frame(pd.DataFrame({"a": ["x", "x"], "b": ["p", "q"], "count": [1, 2]})),
     "variable 'a' has only one level; it carries no information"),
    ("sparse table without complete=False", lambda: table_from_frame(
        pd.DataFrame({"a": ["x", "y"], "b": ["p", "q"], "count": [4, 1]})), "lists 2 of 4 cells (2 missing)"),
    ("microdata value outside the given levels", lambda: table_from_microdata(
        pd.DataFrame({"sex": ["f", "m", "f", "f"], "region": ["n", "s", "s", "s"]}), levels={"region": ["n"]}),
     "variable 'region' has values that are not among its declared levels ['n'] (the values are not shown"),
    ("unknown table name", lambda: load_table("no_such_table"), "'no_such_table' is neither a built-in table"),
    ("missing CSV file", lambda: load_table("no/such/dir/missing.csv"), "no such file: no/such/dir/missing.csv"),
    # models
    ("empty model", _model(""), "the model is empty"),
    ("empty margin", _model("[]"), "the model has an empty margin []"),
    ("unknown variable", _model("[AQ]"), "model names unknown variable 'Q' in [AQ]"),
    ("unknown variable named by a word", _model("[AB][age]"), "model names unknown variable 'age' in [age]; the table "
     "has a367, p53a, c365, mp58, locc, la10 (or A, B, C, D, E, F)"),
    ("variable twice", _model("[AA]"), "margin [AA] names a variable twice"),
    ("text outside brackets", _model("[AB]x"), "'x' is outside brackets"),
    ("all-K-way past the variables", _model("all-7-way"),
     "'all-7-way' asks for margins of 7 variables; the table has 6 (give all-1-way to all-6-way)"),
    ("all-0-way", _model("[AB] all-0-way"), "'all-0-way' asks for margins of 0 variables"),
    # release parameters
    ("zero epsilon", _release(epsilon=0), "epsilon must be a positive finite number, not 0"),
    ("negative epsilon", _release(epsilon=-1), "epsilon must be a positive finite number, not -1"),
    ("infinite epsilon", _release(epsilon=float("inf")), "epsilon must be a positive finite number, not inf"),
    ("NaN epsilon", _release(epsilon=float("nan")), "epsilon must be a positive finite number, not nan"),
    ("gaussian without delta", _release(epsilon=1, mechanism="gaussian"), "the gaussian mechanism gives (epsilon, delta)-DP"),
    ("delta out of range", _release(epsilon=1, mechanism="gaussian", delta=1.5), "delta must lie strictly between 0 and 1, not 1.5"),
    ("delta without gaussian", _release(epsilon=1, delta=0.1, mechanism="efron-stein"),
     "applies to the planned, gaussian, gaussian-copula, copula-id and rap mechanisms only, not to efron-stein"),
    ("Fourier on a non-binary table", _release(epsilon=1, mechanism="fourier"), "the Fourier mechanism needs an all-binary table"),
    ("paper calibration of cells", _release(epsilon=1, mechanism="cells", calibration="paper"),
     "paper reproduces the Fourier and Efron-Stein mechanisms only"),
    ("unknown mechanism", _release(epsilon=1, mechanism="bogus"), "unknown mechanism 'bogus'"),
    ("seed in release mode", lambda: release_margins(builtin_table("edwards"), ReleaseSpec(loss=loss_of(1.0), seed=3)),
     "release mode draws from a secure sampler and accepts no seed"),
    ("seeded release noise source", lambda: noise_source("release", 3), "accepts no seed"),
    # sweep grids
    ("Fourier in a grid with a non-binary table", _grid(mechanisms=("fourier",)), "the Fourier mechanism needs an all-binary table"),
    ("zero repetitions", _grid(repetitions=0), "repetitions must be a positive whole number, not 0"),
    ("infinite repetitions", _grid(repetitions=float("inf")), "repetitions must be a positive whole number, not inf"),
    ("repetitions past the limit", _grid(repetitions=10**12), "repetitions are more than 10,000"),
    ("a count with a huge exponent", lambda: table_from_frame(_frame(["1", "1e999999999", "3", "4"])),
     "the count in column 'count' (data row 2) is too large"),
    ("a count in fullwidth digits", lambda: table_from_frame(_frame(["1", "\uff15", "3", "4"])),
     "the count in column 'count' (data row 2) is not a number written in the digits 0-9"),
    ("a level declared twice", lambda: table_from_frame(_frame([1, 2, 3, 4]), levels={"a": ["x", "y", "x"]}),
     "the declared levels of 'a' list 'x' twice"),
    ("an epsilon twice", _grid(epsilons=(1.0, 1.0)), "an epsilon appears twice in the sweep grid"),
    ("two tables of one name", _grid(tables=("journey_to_work", "journey_to_work")),
     "two tables in one sweep have the same name: 'journey_to_work'"),
]


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


@pytest.mark.parametrize("label, prepare, argv, message", CLI_CASES, ids=[c[0] for c in CLI_CASES])
@pytest.mark.e2e
def test_bad_command_line_input(label, prepare, argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TABRELEASE_LEDGER_KEY", "k" * 64)
    if prepare is not None:
        prepare(tmp_path)
    before = _snapshot(tmp_path)
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.startswith("tabrelease: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert message in err, err
    after = _snapshot(tmp_path)
    assert after == before, f"{label}: wrote {sorted(set(after) - set(before))}"


@pytest.mark.parametrize("label, call, message", API_CASES, ids=[c[0] for c in API_CASES])
def test_bad_api_input(label, call, message):
    with pytest.raises(TabreleaseError) as raised:
        call()
    assert message in str(raised.value), str(raised.value)


def test_the_catalogue_has_no_empty_message_and_no_repeated_case():
    for cases in (CLI_CASES, API_CASES):
        labels = [c[0] for c in cases]
        assert len(labels) == len(set(labels))
        assert all(len(c[-1]) >= 8 for c in cases), [c[0] for c in cases if len(c[-1]) < 8]
    messages = [c[-1] for c in CLI_CASES]  # two cases with one message would be one case listed twice
    assert len(messages) == len(set(messages))


def test_an_abbreviated_option_is_refused_not_read_as_the_option_it_begins(tmp_path, capsys):
    """A new user's trial: `--margin` was taken for `--margins` in silence (argparse's abbreviations)."""
    from tabrelease.cli import main

    assert main(["release", "rochdale", "--epsilon", "1", "--margin", "[A]", "--simulate", "--out",
                 str(tmp_path / "r")]) == 2
    assert "unrecognized arguments: --margin [A]" in capsys.readouterr().err and not (tmp_path / "r").exists()
    assert main(["plan", "rochdale", "--eps", "1"]) == 2


HAIR_EYE = "Hair,Eye,Sex,count\nBlack,Brown,Male,32\nBrown,Brown,Male,53\nBlack,Blue,Female,9\nBrown,Blue,Female,34\n"


@pytest.mark.parametrize("case", ["no header", "utf-8 read as utf-16", "microdata without header"])
def test_a_refusal_does_not_quote_a_first_row_that_is_data(case, tmp_path, capsys):
    """A new user's trial: a cell file without its header was refused with "the columns are ['Black', 'Brown',
    'Male', '32']" (a cell and its count), and a UTF-8 file read as UTF-16 with its whole text as one "column"
    (1.1 KB, the counts back on re-encoding). Such a header is described, not quoted."""
    path = tmp_path / "cells.csv"
    argv = ["release", str(path), "--epsilon", "1", "--margins", "[A,B]", "--out", str(tmp_path / "r")]
    if case == "no header":
        path.write_text(HAIR_EYE.split("\n", 1)[1])
    elif case == "utf-8 read as utf-16":
        path.write_text(HAIR_EYE)
        argv += ["--encoding", "utf-16"]
    else:
        path.write_text("1,2\n3,4\n1,4\n")
        argv += ["--microdata", "--variables", "x"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not shown" in err
    for value in ("32", "53", "Black", "Brown", "1", "3", "4"):
        assert repr(value) not in err and f"{value}," not in err
    assert "慈" not in err  # no text of the file in the wrong encoding
    assert not (tmp_path / "r").exists()


def test_a_header_of_names_is_still_listed_in_the_refusal_where_it_holds_a_name_given(tmp_path, capsys):
    path = tmp_path / "cells.csv"
    path.write_text(HAIR_EYE)
    (tmp_path / "lv.json").write_text('{"Hair": ["Black", "Brown"]}')
    argv = ["release", str(path), "--epsilon", "1", "--count-column", "n", "--out", str(tmp_path / "r")]
    assert main([*argv, "--sparse", "--levels", str(tmp_path / "lv.json")]) == 2
    assert "the columns are ['Hair', 'Eye', 'Sex', 'count']" in capsys.readouterr().err
    # Without one, not even a column of numbers below a word makes it a header: a record's number may be missing.
    assert main(argv) == 2
    assert "the file's first row has 4 fields, not shown" in capsys.readouterr().err


@pytest.mark.parametrize("written", ["0_5", "1_0", "\uff11", "\u0660.\u0665", "1e-3_0"])
def test_a_number_not_in_ascii_decimal_notation_is_refused_not_read_as_float_reads_it(written, tmp_path, capsys):
    """A new user's trial: float() reads 0_5 as 5 and 1_0 as 10 (and fullwidth and Arabic-Indic digits), so
    `--epsilon 0_5` charged epsilon 5 and `--set-budget D --epsilon 1_0` set a budget of 10. Every number given as
    text is read in ASCII decimal notation only: on the command line, in the API and in a batch's strings."""
    from tabrelease.noise import check_delta, check_epsilon
    from tabrelease.spec import positive_number

    tr_ledger = tmp_path / "L.json"
    assert main(["ledger", "init", str(tr_ledger)]) == 0
    for argv in (["plan", "rochdale", "--epsilon", written], ["plan", "rochdale", "--target-l1", written],
                 ["release", "rochdale", "--epsilon", written, "--ledger", str(tr_ledger), "--out",
                  str(tmp_path / "r")],
                 ["ledger", str(tr_ledger), "--set-budget", "x", "--epsilon", written],
                 ["ledger", str(tr_ledger), "--set-budget", "x", "--epsilon", "1", "--delta", written]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "number" in err and "Traceback" not in err, err
    assert not (tmp_path / "r").exists()
    ledger_text = tr_ledger.read_text()
    assert '"x"' not in ledger_text and '"release"' not in ledger_text  # no budget set, nothing charged
    for check in (check_epsilon, positive_number):
        with pytest.raises(TabreleaseError, match="not a number"):
            check(written)
    with pytest.raises(TabreleaseError):
        check_delta("1e-6".replace("1", written))
    assert check_epsilon(" 0.5 ") == 0.5 and check_epsilon("1e-3") == 0.001 and positive_number("2") == 2.0


@pytest.mark.parametrize("form", ["cells", "microdata", "microdata file"])
def test_one_label_written_both_composed_and_decomposed_is_refused_not_made_two_levels(form, tmp_path):
    """A new user's trial: a file holding "é" both as one character (NFC) and as "e" with a combining accent (NFD)
    had its one level published as two rows that look the same. Refused, without naming the labels; a file written
    in NFD alone is read as it is."""
    from tabrelease.tables import read_microdata

    composed, decomposed = "\u00e9", "e\u0301"
    rows = [(x, y) for x in (composed, decomposed, "o") for y in "ab"]
    frame = pd.DataFrame(rows, columns=["x", "y"])
    with pytest.raises(TabreleaseError, match="two levels that differ only in how their accents are encoded") as info:
        if form == "cells":
            table_from_frame(frame.assign(count=1), "count")
        elif form == "microdata":
            table_from_microdata(frame)
        else:
            path = tmp_path / "people.csv"
            frame.to_csv(path, index=False)
            read_microdata(path, engine="arrow")
    assert composed not in str(info.value) and decomposed not in str(info.value)
    only_nfd = frame[frame.x != composed].assign(count=1)
    assert sorted(table_from_frame(only_nfd, "count").levels[0]) == sorted([decomposed, "o"])


@pytest.mark.parametrize("rows, said", [("1,2\n3,4\n1,4\n", "a variable (its name not shown"),
                                        ("1,2\n3,4\n1,5\n3,4\n", "looks like a record: in column 1 it holds"),
                                        ("1,2\n3,4\n5,6\n3,4\n", "2 variables undeclared, not named")])
def test_microdata_without_a_header_do_not_have_their_first_row_named(rows, said, tmp_path, capsys):
    """A review's trial: microdata without a header have their first record read as names; the refusals of a
    variable of one level and of undeclared levels named those values. Numbers are not shown as names."""
    path = tmp_path / "people.csv"
    path.write_text(rows)
    assert main(["release", str(path), "--microdata", "--epsilon", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert said in err and "'1'" not in err and "'2'" not in err, err


RECORDS_WITHOUT_HEADER = "male,urban,yes\nfemale,rural,no\nmale,rural,no\nfemale,urban,yes\n"
RECORD_VALUES = ("male", "urban", "yes", "female", "rural", "no")
FIRST_RECORD_UNLIKE_THE_REST = "male,urban,yes\nfemale,rural,no\nother,suburb,unknown\nfemale,suburb,no\n"


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
@pytest.mark.parametrize("case", ["variables asked", "levels of other names", "nothing declared", "missing value",
                                  "one level", "plan", "without --microdata", "a number missing", "a repeated value",
                                  "margins by name", "margins by name, a first record unlike the rest",
                                  "nothing declared, a first record unlike the rest"])
def test_microdata_of_text_without_a_header_row_have_no_record_quoted(engine, case, tmp_path, capsys):
    """A new user's trial: microdata of text codes saved without their header row have their first record read as
    names, and it holds no number: "has no column 'sex'; the columns are ['male', 'urban', 'yes']" quoted a
    person's record. A header is quoted only where it is known to be one (a name the user gave in it, or a column
    of numbers below a name); a refusal that names a column numbers it instead."""
    path = tmp_path / "people.csv"
    text = {"missing value": RECORDS_WITHOUT_HEADER.replace("female,rural", "female,"),
            "one level": RECORDS_WITHOUT_HEADER.replace("rural", "urban"),
            # a review's trials: a first record whose number is missing over a column of numbers, and one that
            # holds a value twice (read as two columns of one name)
            "a number missing": "male,urban,NA\nfemale,rural,34\nmale,rural,51\n",
            "a repeated value": "yes,yes,male\nno,no,female\n"}.get(case, RECORDS_WITHOUT_HEADER)
    if "unlike the rest" in case:  # no field recurs below: not seen to be a record, but not known to be a header
        text, case = FIRST_RECORD_UNLIKE_THE_REST, case.split(",")[0]
    path.write_text(text)
    (tmp_path / "lv.json").write_text('{"sex": ["female", "male"], "area": ["rural", "urban"], "smoker": ["no", '
                                      '"yes"]}')
    options = {"variables asked": ["--variables", "sex,area"], "levels of other names": ["--levels",
                                                                                         str(tmp_path / "lv.json")],
               "missing value": ["--simulate", "--seed", "1"], "one level": ["--simulate", "--seed", "1"],
               "a number missing": ["--variables", "sex,area"], "a repeated value": ["--simulate", "--seed", "1"]}
    command = ["plan", str(path), "--microdata", "--variables", "sex,area", "--epsilon", "1"] if case == "plan" else [
        "release", str(path), "--microdata", *options.get(case, []), "--margins",
        "[sex,area]" if case == "margins by name" else "[AB]", "--epsilon", "1", "--out", str(tmp_path / "r")]
    if case == "margins by name":
        command += ["--simulate", "--seed", "1"]
    if case == "without --microdata":  # read as a table of cells: its count column is missing
        command.remove("--microdata")
    assert main([*command, *(["--engine", engine] if "--microdata" in command else [])]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for value in (*RECORD_VALUES, "NA", "34"):
        assert repr(value) not in err and f"{value}," not in err and f"{value})" not in err, (value, err)
    record = "looks like a record: in columns 1, 2 and 3 it holds a value found again below it"
    said = {"missing value": "column 2 has missing values: --missing-level LABEL reads them as a level",
            "one level": "variable 2 has only one level", "nothing declared": record,
            "levels of other names": record, "a repeated value": "columns 1 and 2 have the same name",
            "margins by name": record}
    if text == FIRST_RECORD_UNLIKE_THE_REST:
        said = {"nothing declared": "3 variables undeclared, not named",
                "margins by name": "the table has 3 variables, A, B, C by letter (their names not shown"}
    assert said.get(case, "the file's first row has 3 fields, not shown") in err, err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
def test_a_header_known_to_be_one_is_still_named(engine, tmp_path, capsys):
    """The counterpart: a header holding a name the user gave, or a levels file's variable, is quoted as before."""
    path = tmp_path / "people.csv"
    path.write_text("sex,area,smoker\n" + RECORDS_WITHOUT_HEADER)
    (tmp_path / "lv.json").write_text('{"sex": ["female", "male"]}')
    out = ["--margins", "[AB]", "--epsilon", "1", "--out", str(tmp_path / "r"), "--engine", engine]
    assert main(["release", str(path), "--microdata", "--variables", "sex,age", *out]) == 2
    assert "has no column 'age'; the columns are ['sex', 'area', 'smoker']" in capsys.readouterr().err
    assert main(["release", str(path), "--microdata", "--levels", str(tmp_path / "lv.json"), *out]) == 2
    assert "(undeclared: area, smoker)" in capsys.readouterr().err
    path.write_text("sex,area,smoker\nmale,,yes\nfemale,rural,no\n")
    assert main(["release", str(path), "--microdata", "--levels", str(tmp_path / "lv.json"), *out]) == 2
    assert "column 'area' has missing values" in capsys.readouterr().err


def _truncated_parquet(path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"sex": ["f", "m"] * 50, "area": ["u", "r"] * 50}), path)
    path.write_bytes(path.read_bytes()[:-40])  # a copy cut short: its footer gone


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
@pytest.mark.parametrize("name, write, said", [
    ("latin.csv", lambda p: p.write_bytes("sex,area\nmale,urban\nm\u00e4le,rural\nmale,rural\n".encode("latin-1")),
     "latin.csv is not valid utf-8 text (line 3); if it was saved by Excel or an older system, try --encoding "
     "latin-1 or --encoding cp1252"),
    ("header.csv", lambda p: p.write_text("sex,area"), "header.csv: the microdata have no rows"),
    ("header.csv", lambda p: p.write_text("sex,area\n"), "header.csv: the microdata have no rows"),
    ("cut.parquet", _truncated_parquet, "cut.parquet is not a readable Parquet file: it lacks Parquet's closing mark"),
    ("text.parquet", lambda p: p.write_text("sex,area\nmale,urban\n"), "text.parquet is not a readable Parquet file"),
    ("people.csv.gz", lambda p: p.write_bytes(__import__("gzip").compress(b"sex,area\nmale,urban\n")),
     "people.csv.gz is compressed (.gz); tables and microdata are read uncompressed: decompress it first"),
    ("gap.csv", lambda p: p.write_text("sex,area\nmale,urban\nfemale,\nmale,rural\n"),
     "gap.csv: column 'area' has missing values"),
])
def test_a_microdata_file_that_cannot_be_read_is_named_with_its_reason_in_either_engine(name, write, said, engine,
                                                                                        tmp_path, capsys):
    """A new user's trial: the streaming engine said only "(ArrowInvalid)" of a latin-1 file, a header without
    rows, a cut-short Parquet file and a CSV named .parquet, where the in-memory reader gave the line and the
    --encoding hint; a .csv.gz was advised to try latin-1; "column ... has missing values" named no file. Either
    engine now says the same, naming the file."""
    path = tmp_path / name
    write(path)
    argv = ["release", str(path), "--microdata", "--variables", "sex,area", "--engine", engine, "--margins", "[AB]",
            "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and said in err and "Arrow" not in err, err
    assert "\u00e4" not in err and "urban" not in err
    assert not (tmp_path / "r").exists()


def test_a_levels_file_and_a_batch_spec_saved_with_a_byte_order_mark_are_read(tmp_path, capsys):
    """A new user's trial: a levels file saved by Windows Notepad (UTF-8 with a BOM) was refused as "not valid
    JSON (Unexpected UTF-8 BOM)"; the metadata file was read. Both are read; so is a batch spec."""
    import json

    from tabrelease.batch import read_spec

    (tmp_path / "people.csv").write_text("sex,area\nmale,urban\nfemale,rural\nmale,rural\n")
    (tmp_path / "lv.json").write_bytes(b'\xef\xbb\xbf{"sex": ["female", "male"], "area": ["rural", "urban"]}')
    assert main(["release", str(tmp_path / "people.csv"), "--microdata", "--levels", str(tmp_path / "lv.json"),
                 "--margins", "[AB]", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path / "r")]) == 0
    described = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    assert "rural" in json.dumps(described)
    (tmp_path / "b.toml").write_bytes(b'\xef\xbb\xbfledger = "L.json"\n[datasets.czech]\nbuiltin = "czech"\n'
                                      b'[[releases]]\ndataset = "czech"\nepsilon = 0.5\nout = "r1"\nsimulate = true\n')
    assert [release.spec.epsilon for release in read_spec(tmp_path / "b.toml").releases] == [0.5]


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
def test_codes_stored_as_floats_are_said_to_be_floats_when_levels_declared_as_integers_do_not_match(engine, tmp_path,
                                                                                                  capsys):
    """A new user's trial: Parquet codes that pandas had stored as floats (1.0, 2.0) were refused as "not among
    its declared levels ['1', '2']" with no word of why; the refusal now says the column's type (not its values)."""
    pd.DataFrame({"sex": [1.0, 2.0] * 5, "area": ["u", "r"] * 5}).to_parquet(tmp_path / "p.parquet")
    (tmp_path / "lv.json").write_text('{"sex": ["1", "2"], "area": ["r", "u"]}')
    argv = ["release", str(tmp_path / "p.parquet"), "--microdata", "--engine", engine, "--levels",
            str(tmp_path / "lv.json"), "--margins", "[AB]", "--epsilon", "1", "--simulate", "--seed", "1", "--out",
            str(tmp_path / "r")]
    assert main(argv) == 2
    assert "the column is stored as floating-point numbers, read as text such as '1.0'" in capsys.readouterr().err
    (tmp_path / "lv.json").write_text('{"sex": ["1.0", "2.0"], "area": ["r", "u"]}')
    assert main(argv) == 0


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
def test_a_header_or_a_row_not_text_in_its_encoding_is_refused_alike_and_a_last_empty_record_is_missing(
        engine, tmp_path, capsys):
    """A review's trials: the streaming engine read a latin-1 header with its bad byte replaced (a variable
    's\\ufffdx' published) and said "(UnicodeDecodeError)" of a cp1252 file holding byte 0x81; the in-memory reader
    dropped a last record empty in the one column read, taking it for a trailing blank row."""
    out = ["--margins", "[AB]", "--epsilon", "1", "--simulate", "--seed", "1", "--out", str(tmp_path / "r"),
           "--engine", engine]
    cases = [("s\xe9x,area\nmale,urban\nfemale,rural\n".encode("latin-1"), [], "is not valid utf-8 text (line 1)"),
             (b"sex,area\nm,u\nm,u\nf,r\x81\n", ["--encoding", "cp1252"], "is not valid cp1252 text (line 4)"),
             (b'sex,area\n"m","u"\n"f","r"\n"","u"\n', ["--variables", "sex", "--margins", "[A]"],
              "column 'sex' has missing values")]
    for data, options, said in cases:
        (tmp_path / "p.csv").write_bytes(data)
        assert main(["release", str(tmp_path / "p.csv"), "--microdata", *out, *options]) == 2
        err = capsys.readouterr().err
        assert said in err and "\ufffd" not in err and "Error)" not in err, err
        assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
def test_a_first_record_holding_a_variables_name_is_still_not_taken_for_a_header(engine, tmp_path, capsys):
    """A second review's trial: a category named as its variable (``employed``) let a headerless file's first
    record ``male,employed,yes`` pass for a header holding a name the user gave, and be quoted; so did the
    examples of `fit`'s refusal and a batch's budget_attributes. A field that is a declared level, or recurs in its
    column below, is a record's."""
    path = tmp_path / "e.csv"
    path.write_text("male,employed,yes\nfemale,unemployed,no\nmale,unemployed,no\nfemale,employed,yes\n")
    (tmp_path / "lv.json").write_text('{"sex": ["female", "male"], "employed": ["employed", "unemployed"], '
                                      '"smoker": ["no", "yes"]}')
    source = [str(path), "--microdata", "--engine", engine]
    for argv in (["release", *source, "--levels", str(tmp_path / "lv.json"), "--epsilon", "1", "--margins",
                  "all-2-way", "--out", str(tmp_path / "r")],
                 ["plan", *source, "--variables", "sex,employed", "--epsilon", "1"],
                 ["plan", *source, "--epsilon", "1", "--margins", "[sex]"],
                 ["fit", *source]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "'male'" not in err and "male," not in err, err
        assert "yes" not in err and "(male" not in err and ", yes" not in err, err
    # A header holding the names given, none of them a value below, is named as before; one whose name is also a
    # value in its column is not (a record's would be), the safe side.
    path.write_text("sex,work,smoker\nmale,employed,yes\nfemale,unemployed,no\n")
    assert main(["plan", *source, "--variables", "sex,job", "--epsilon", "1"]) == 2
    assert "the columns are ['sex', 'work', 'smoker']" in capsys.readouterr().err
    path.write_text("sex,employed,smoker\nmale,employed,yes\nfemale,unemployed,no\n")
    assert main(["plan", *source, "--variables", "sex,job", "--epsilon", "1"]) == 2
    assert "not shown" in capsys.readouterr().err


def test_a_batch_budget_attribute_that_names_no_variable_of_a_headerless_file_is_answered_by_letter(tmp_path,
                                                                                                   capsys):
    """The second review's trial: a batch's budget_attributes naming no variable listed the variables, that is
    the first record of a file without its header row."""
    (tmp_path / "h.csv").write_text(FIRST_RECORD_UNLIKE_THE_REST)
    assert main(["ledger", "init", str(tmp_path / "L.json")]) == 0
    (tmp_path / "b.toml").write_text(
        'ledger = "L.json"\n[datasets.d]\nfile = "h.csv"\nmicrodata = true\nbudget = 5.0\n'
        'budget_neighbours = "sensitive-attributes"\nbudget_attributes = ["sex"]\n'
        '[[releases]]\ndataset = "d"\nepsilon = 0.5\nout = "r1"\nsimulate = true\nmargins = "[AB]"\n')
    capsys.readouterr()
    assert main(["batch", "--dry-run", str(tmp_path / "b.toml")]) == 2
    err = capsys.readouterr().err
    assert "budget_attributes 'sex' names no variable of the table (its variables: 3 variables, A, B, C by letter" \
        in err, err
    for value in RECORD_VALUES:
        assert repr(value) not in err and f"{value}," not in err and f"{value})" not in err, (value, err)


@pytest.mark.parametrize("engine", ["arrow", "pandas"])
def test_a_simulation_of_a_file_without_its_header_row_is_refused_not_published_with_a_record_for_names(engine,
                                                                                                        tmp_path,
                                                                                                        capsys):
    """A file saved without its header row, simulated without --variables or levels, had its first person's record
    published as the variables' names (public/release.json, the margins' file names, a sensitive-attribute
    unit's attributes) and left out of the counts. A first row holding a value found again in its column is
    refused; so is a header repeated below (its copies would be counted as people). A header is read as before."""
    path = tmp_path / "people.csv"
    out = ["--epsilon", "1", "--simulate", "--seed", "1", "--neighbours", "replace", "--margins", "all-2-way",
           "--engine", engine, "--out", str(tmp_path / "r")]
    for text, said in ((RECORDS_WITHOUT_HEADER * 3, "in columns 1, 2 and 3 it holds a value found again below it"),
                       ("sex,area,smoker\n" + RECORDS_WITHOUT_HEADER + "sex,area,smoker\n" + RECORDS_WITHOUT_HEADER,
                        "in columns 1, 2 and 3 it holds")):
        path.write_text(text)
        for options in ([], ["--mechanism", "sensitive-attributes", "--sensitive", "A"]):
            assert main(["release", str(path), "--microdata", *out, *options]) == 2
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and said in err and "--variables" in err, err
            for value in RECORD_VALUES:
                assert repr(value) not in err and f"{value}," not in err, (value, err)
            assert not (tmp_path / "r").exists()
    path.write_text("sex,area,smoker\n" + RECORDS_WITHOUT_HEADER * 3)
    assert main(["release", str(path), "--microdata", *out]) == 0
    described = json.loads((tmp_path / "r" / "public" / "release.json").read_text())
    assert [v["name"] for v in described["variables"]] == ["sex", "area", "smoker"]


def test_the_advice_to_read_fewer_variables_comes_only_where_one_undeclared_is_not_released(tmp_path, capsys):
    """A new user's trial: every refusal of undeclared levels ended "or read only the variables released
    (--variables A,B,...)", where every variable was released too, and for a --sparse table."""
    (tmp_path / "p.csv").write_text("sex,area,smoker\nmale,urban,yes\nfemale,rural,no\nmale,rural,no\n")
    argv = ["release", str(tmp_path / "p.csv"), "--microdata", "--variables", "sex,area,smoker", "--epsilon", "1",
            "--out", str(tmp_path / "r"), "--margins"]
    assert main([*argv, "[AB]"]) == 2
    assert "read only the variables released (--variables" in capsys.readouterr().err
    assert main([*argv, "all-2-way"]) == 2
    err = capsys.readouterr().err
    assert "declare every variable's levels" in err and "--variables" not in err, err


def test_an_option_a_command_does_not_take_points_to_that_commands_help(capsys):
    """A new user's trial: `plan ... --mechanism auto` pointed to 'tabrelease --help', not the command's own."""
    assert main(["plan", "czech", "--epsilon", "1", "--mechanism", "auto"]) == 2
    assert "unrecognized arguments: --mechanism auto (see 'tabrelease plan --help')" in capsys.readouterr().err
