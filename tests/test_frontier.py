"""The frontier: its rows are the releases they say they are, and its report is computed from its rows."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

import tabrelease as tr
from tabrelease import frontier
from tabrelease.cli import main


@pytest.fixture(scope="module")
def runs():
    return frontier.run_frontier(["edwards"], [0.5, 2.0], 3)


def test_cells_rows_are_the_releases_they_claim(runs):
    # Recomputed by hand from the seed: Laplace(1/epsilon) on every cell (sensitivity 1, add-remove), clip at 0,
    # round half to even, margins of the rounded table; the L1 error against the true margins.
    table = tr.builtin_table("edwards")
    assert set(runs.workload) == {"model", "all-2-way"}
    for row in runs[runs.strategy == "cells"].itertuples():
        margins = tr.default_model(table).generators if row.workload == "model" else list(
            itertools.combinations(range(table.k), 2))
        task = frontier.FrontierTask("edwards", row.epsilon, 3, frontier.MASTER_SEED, workload=row.workload)
        rng = np.random.default_rng(frontier._seed(task, row.repetition, 2))
        noisy = table.counts + rng.laplace(0.0, 1.0 / row.epsilon, size=table.shape)
        rounded = np.rint(np.clip(noisy, 0, None))
        errors = []
        for g in margins:
            drop = tuple(j for j in range(table.k) if j not in g)
            errors.append(np.abs(rounded.sum(axis=drop) - table.counts.sum(axis=drop)).sum())
        assert row.max_l1 == pytest.approx(max(errors)) and row.abs_dn == pytest.approx(abs(rounded.sum() - table.n))


def test_cells_least_squares_refits_the_very_cells_of_each_cells_run(runs):
    # The same noisy cells (the cells run's own stream), fitted by non-negative least squares with the total pinned
    # and rounded under control: one consistent integer table per run, beside every cells run.
    model = runs[runs.workload == "model"]
    cells = model[model.strategy == "cells"].set_index(["epsilon", "repetition"])
    fitted = model[model.strategy == "cells-least-squares"].set_index(["epsilon", "repetition"])
    assert sorted(fitted.index) == sorted(cells.index)
    assert fitted.integer.all() and fitted.nonnegative.all() and fitted.consistent.all()
    from tabrelease.testing import plan_at
    from tabrelease.noise import SimulationNoise
    from tabrelease.pipeline import measure, release_from_measurements
    from tabrelease.planner import with_post_processing

    table = tr.builtin_table("edwards")
    margins = tr.default_model(table).generators
    for (epsilon, repetition), row in fitted.iterrows():
        task = frontier.FrontierTask("edwards", epsilon, 3, frontier.MASTER_SEED)
        plan = plan_at(table.shape, margins, epsilon, mechanism="cells")
        noisy = measure(plan, table.counts, SimulationNoise(frontier._seed(task, repetition, 2)))
        # The cells run's error is recomputed by hand in the test above from this very seed.
        release = release_from_measurements(with_post_processing(plan, "least-squares", "controlled"), noisy)
        errors = [np.abs(m - table.margin_counts(g)).sum() for g, m in zip(release.margins, release.released_margins)]
        assert row.max_l1 == pytest.approx(max(errors))


# Edwards has no attribute that the frontier treats as sensitive: that strategy is not run there.
ON_EDWARDS = [name for name in frontier.STRATEGIES if name != "sensitive-attributes"]


def test_every_strategy_every_point(runs):
    assert "edwards" not in frontier.FRONTIER_SENSITIVE
    assert set(runs.strategy) == set(ON_EDWARDS)
    assert len(runs) == 2 * 2 * 3 * len(ON_EDWARDS)  # two workloads, two epsilons, three runs
    # The planned release and the least-squares re-estimate are integer, non-negative and consistent.
    for name in ("planned", "paper-least-squares"):
        part = runs[runs.strategy == name]
        assert part.integer.all() and part.nonnegative.all() and part.consistent.all()
    assert runs.privacy.str.contains("differential privacy|-DP via rho-zCDP|local differential privacy").all()
    # Slow strategies run fewer times per point, as declared.
    assert (runs[runs.strategy == "rap"].groupby(["workload", "epsilon"]).size()
            == min(3, frontier.strategy("rap").repetitions)).all()


def test_report_numbers_come_from_the_rows(runs, tmp_path):
    out = frontier.write_frontier(tmp_path / "f", runs, seconds=1.0, command="test")
    ratios = pd.read_csv(out / "ratios.csv")
    # Recomputed with plain pandas from the rows: ratio of mean max-L1, planned over the paper's LP.
    means = runs.groupby(["workload", "epsilon", "strategy"]).max_l1.mean()
    for _, row in ratios.iterrows():
        expected = means[(row["workload"], row["epsilon"], "planned")] / means[(row["workload"], row["epsilon"],
                                                                                 "paper-lp")]
        assert row["planned / paper-lp"] == pytest.approx(expected, abs=5e-4)
    report = (out / "report.md").read_text()
    assert f"{ratios.iloc[0, 3]:.3f}" in report and "![edwards](edwards.svg)" in report
    assert "paper model (workload `model`) and every two-way margin (`all-2-way`)." in report
    # The header names the workloads the run has (a new user's run of the model alone was said to have both).
    only = frontier.write_frontier(tmp_path / "m", runs[runs.workload == frontier.MODEL], seconds=1.0, command="t")
    assert "paper model (workload `model`). Every number" in (only / "report.md").read_text()
    assert "![edwards-all-2-way](edwards-all-2-way.svg)" in report and (out / "edwards-all-2-way.svg").exists()
    # The planned release against the best central-DP strategy at each point, recounted with plain pandas.
    central = [n for n in ON_EDWARDS if frontier.strategy(n).guarantee == "central epsilon-DP"]
    best = means.unstack("strategy")[central]
    to_best = best["planned"] / best.min(axis=1)
    assert f"median {to_best.median():.3f}, worst {to_best.max():.3f} over {len(to_best)} points" in report


def test_frontier_command_json(tmp_path, capsys):
    assert main(["frontier", "--out", str(tmp_path / "f"), "--tables", "edwards", "--epsilon", "1",
                 "--repetitions", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["releases"] == 2 * 2 * len(ON_EDWARDS) and doc["noise_mode"] == "simulation"
    assert any(f.endswith("report.md") for f in doc["files"])


def test_comparison_is_counted_from_the_summary(runs):
    summary = frontier.summarise(runs)
    text = "\n".join(frontier.comparison(summary))
    # The winner at each point, recounted here from the summary with plain pandas.
    central = summary[summary.strategy.isin(frontier.STRATEGIES)]
    small = central[central.epsilon <= 0.1]
    large = central[central.epsilon >= 1]
    best = large.groupby(["table", "workload", "epsilon"]).max_l1_mean.transform("min")
    winners = large.loc[large.max_l1_mean <= best * (1 + 1e-9), "strategy"].value_counts()
    assert small.empty and "small epsilon" not in text
    points = large.groupby(["table", "workload", "epsilon"]).ngroups
    said = ", ".join(f"{name} at {n} of {points}" for name, n in winners.items())
    assert f"large epsilon (>= 1): the lowest mean max-L1 error was {said}" in text
    # The one to choose: the lowest median ratio to the best, then the lowest worst ratio, recounted here.
    guarantee = frontier.strategy("planned").guarantee
    within = summary[[frontier.strategy(name).guarantee == guarantee for name in summary.strategy]].copy()
    within["to_best"] = within.max_l1_mean / within.groupby(["table", "workload", "epsilon"]).max_l1_mean.transform("min")
    stats = within.groupby("strategy").to_best.agg(["median", "max"]).reset_index()
    choice = stats.sort_values(["median", "max", "strategy"]).strategy.iloc[0]
    assert f"so, within this guarantee, {choice} is the one to choose" in text
    # The margins strategy's outputs disagree with each other, and the comparison says so with its share.
    share = runs[runs.strategy == "margins"].consistent.mean()
    assert f"the output of margins was mutually consistent in {share:.0%}" in text


def test_rerunning_some_strategies_keeps_the_others_rows_and_reproduces_its_own(tmp_path, capsys):
    """--strategies planned --keep-others: the other strategies' rows are those of the run in --out, and the planned
    rows drawn again are the same numbers (a strategy's seeds do not depend on which others run)."""
    out = tmp_path / "f"
    common = ["frontier", "--out", str(out), "--tables", "titanic", "--epsilon", "0.5", "--repetitions", "2",
              "--workloads", "model", "--quiet"]
    assert main(common) == 0
    before = pd.read_csv(out / "runs.csv")
    assert main(common + ["--force", "--keep-others", "--strategies", "planned"]) == 0
    after = pd.read_csv(out / "runs.csv")
    key = ["strategy", "repetition"]
    columns = [c for c in before.columns if c != "seconds"]
    pd.testing.assert_frame_equal(before.sort_values(key)[columns].reset_index(drop=True),
                                  after.sort_values(key)[columns].reset_index(drop=True))
    assert "were kept from the run before" in (out / "report.md").read_text()
    # A strategy that re-estimates another's measurements, rerun alone: its source is drawn again first (not
    # reported), and its rows are the same numbers.
    assert main(common + ["--force", "--keep-others", "--strategies", "cells-least-squares,planned"]) == 0
    again = pd.read_csv(out / "runs.csv")
    pd.testing.assert_frame_equal(before.sort_values(key)[columns].reset_index(drop=True),
                                  again.sort_values(key)[columns].reset_index(drop=True))
    # The last --repetitions wins: a rerun of other repetitions than the kept rows' is refused.
    assert main(common + ["--force", "--keep-others", "--strategies", "planned", "--repetitions", "3"]) == 2
    assert "other points or repetitions" in capsys.readouterr().err


def test_every_row_of_the_frontier_s_files_says_simulation_noise_made_it(tmp_path):
    """runs.csv and summary.csv name the noise mode in every row (a copy away from report.md still says it), and a
    runs.csv written before the column (the committed reports') is kept with its rows marked so, as they were made."""
    out = tmp_path / "f"
    common = ["frontier", "--out", str(out), "--tables", "titanic", "--epsilon", "0.5", "--repetitions", "2",
              "--workloads", "model", "--quiet", "--strategies", "planned,cells"]
    assert main(common) == 0
    for name in ("runs.csv", "summary.csv"):
        assert set(pd.read_csv(out / name)["noise_mode"]) == {"simulation"}, name
    old = pd.read_csv(out / "runs.csv")
    old.drop(columns="noise_mode").to_csv(out / "runs.csv", index=False)
    assert main(common + ["--force", "--keep-others", "--strategies", "planned"]) == 0
    kept = pd.read_csv(out / "runs.csv")
    assert list(kept.columns) == list(frontier.RUN_COLUMNS)
    assert set(kept.loc[kept.strategy == "cells", "noise_mode"]) == {"simulation"}
    # A file that is not a frontier's runs is refused in one line, not read half-way.
    (out / "runs.csv").write_text("table,workload\nx,y\n")
    assert main(common + ["--force", "--keep-others", "--strategies", "planned"]) == 2


def _housing_file(folder):
    """The built-in housing table's cells written as a long CSV of a new name: a table the frontier reads from a
    file, with no paper model."""
    folder.mkdir(parents=True, exist_ok=True)
    table = tr.builtin_table("housing")
    rows = ["A,B,C,D,count"] + [",".join([*(table.levels[j][i] for j, i in enumerate(cell)), str(int(table.counts[cell]))])
                                for cell in itertools.product(*(range(s) for s in table.shape))]
    path = folder / "my_housing.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_table_read_from_a_file_releases_every_three_way_margin(tmp_path):
    # Every three-way margin of a four-variable table read from a file: the cells rows recomputed by hand from the
    # seed (Laplace(1/epsilon) on every cell, clip, round half to even), the rows named by the file's stem, and the
    # seeds those of the stem, not of the folder: the same file elsewhere gives the very same rows.
    path = _housing_file(tmp_path / "a")
    runs = frontier.run_frontier([str(path)], [0.5], 2, strategies=("planned", "cells"),
                                 workloads=(frontier.ALL_THREE_WAY,))
    table = tr.builtin_table("housing")
    triples = list(itertools.combinations(range(4), 3))
    assert frontier.workload_margins(tr.load_table(str(path)), frontier.ALL_THREE_WAY) == triples
    assert set(runs.table) == {"my_housing"} and set(runs.workload) == {"all-3-way"} and len(runs) == 4
    for row in runs[runs.strategy == "cells"].itertuples():
        task = frontier.FrontierTask(str(path), 0.5, 2, frontier.MASTER_SEED, workload=frontier.ALL_THREE_WAY)
        rng = np.random.default_rng(frontier._seed(task, row.repetition, 2))
        rounded = np.rint(np.clip(table.counts + rng.laplace(0.0, 2.0, size=table.shape), 0, None))
        errors = [np.abs(rounded.sum(axis=drop) - table.counts.sum(axis=drop)).sum()
                  for drop in ((3,), (2,), (1,), (0,))]  # the axis each triple leaves out, in the triples' order
        assert row.max_l1 == pytest.approx(max(errors)) and row.mean_l1 == pytest.approx(np.mean(errors))
    elsewhere = frontier.run_frontier([str(_housing_file(tmp_path / "b" / "c"))], [0.5], 2,
                                      strategies=("planned", "cells"), workloads=(frontier.ALL_THREE_WAY,))
    pd.testing.assert_frame_equal(runs.drop(columns="seconds"), elsewhere.drop(columns="seconds"))
    # The seed's table word is the stem's: a built-in's name keeps its place among the paper's tables.
    assert frontier._table_index(frontier.table_label(str(path))) == frontier._table_index("my_housing")
    assert frontier.table_label("rochdale") == "rochdale" and frontier._table_index("rochdale") == 2


def test_a_three_way_workload_on_a_built_in_table_keeps_the_other_workloads_draws():
    # all-3-way takes the next word of the seeds: the model's and all-2-way's draws are those they always were.
    task = frontier.FrontierTask("edwards", 1.0, 2, frontier.MASTER_SEED, workload=frontier.ALL_TWO_WAY)
    words = [frontier.MASTER_SEED, 0, 1_000_000, 1, 2, 1]
    assert frontier._seed(task, 1, 2) == int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> 1)
    three = frontier.FrontierTask("edwards", 1.0, 2, frontier.MASTER_SEED, workload=frontier.ALL_THREE_WAY)
    words[-1] = 2
    assert frontier._seed(three, 1, 2) == int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] >> 1)
    assert frontier.WORKLOADS == ("model", "all-2-way")  # the default run is unchanged


def test_a_file_table_has_no_model_workload_and_two_files_of_one_stem_are_refused(tmp_path):
    path = str(_housing_file(tmp_path))
    with pytest.raises(tr.TabreleaseError, match="my_housing has no default model"):
        frontier.run_frontier([path], [1.0], 2, strategies=("cells",), workloads=(frontier.MODEL,))
    with pytest.raises(tr.TabreleaseError, match="the frontier's tables include 'my_housing' twice"):
        frontier.run_frontier([path, str(_housing_file(tmp_path / "other"))], [1.0], 2, strategies=("cells",),
                              workloads=(frontier.ALL_TWO_WAY,))


def test_frontier_command_on_a_file(tmp_path, capsys):
    path = _housing_file(tmp_path)
    assert main(["frontier", "--out", str(tmp_path / "f"), "--tables", str(path), "--workloads", "all-2-way,all-3-way",
                 "--epsilon", "1", "--repetitions", "2", "--strategies", "planned,cells", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["releases"] == 2 * 2 * 2
    report = (tmp_path / "f" / "report.md").read_text()
    assert "every two-way margin (`all-2-way`) and every three-way margin (`all-3-way`)" in report
    assert (tmp_path / "f" / "my_housing-all-3-way.svg").is_file()


def test_a_file_stem_is_hashed_into_the_seed_as_its_name():
    # The table's word in the seed, recomputed from its definition: 100 + the first four bytes of the name's
    # BLAKE2b-32 digest, big-endian; another stem gives another word, and the paper's tables keep their places.
    import hashlib

    word = 100 + int.from_bytes(hashlib.blake2b(b"my_housing", digest_size=4).digest(), "big")
    assert frontier._table_index(frontier.table_label("/any/folder/my_housing.csv")) == word
    assert frontier._table_index("other_stem") != word
    assert [frontier._table_index(t) for t in frontier.TABLES] == [0, 1, 2, 3]


def test_a_file_named_as_a_built_in_table_is_refused_unless_it_holds_its_counts(tmp_path):
    # A file called edwards.csv holding housing's counts would take Edwards' seeds, figures and checks.
    housing = _housing_file(tmp_path / "h")
    impostor = tmp_path / "edwards.csv"
    impostor.write_text(housing.read_text())
    with pytest.raises(tr.TabreleaseError, match="a table from a file is named 'edwards', as a built-in table is"):
        frontier.run_frontier([str(impostor)], [1.0], 2, strategies=("cells",), workloads=(frontier.ALL_TWO_WAY,))
    with pytest.raises(tr.TabreleaseError, match="the frontier's tables include 'edwards' twice"):
        frontier.run_frontier(["edwards", "edwards"], [1.0], 2, strategies=("cells",))
    # The built-in table's own file is that table: its rows are the built-in's, draw for draw.
    own = frontier.run_frontier([str(_own_edwards(tmp_path))], [1.0], 2,
                                strategies=("cells",), workloads=(frontier.ALL_TWO_WAY,))
    built_in = frontier.run_frontier(["edwards"], [1.0], 2, strategies=("cells",), workloads=(frontier.ALL_TWO_WAY,))
    pd.testing.assert_frame_equal(own.drop(columns="seconds"), built_in.drop(columns="seconds"))


def _own_edwards(folder):
    """The built-in Edwards table's cells in a file named edwards.csv."""
    table = tr.builtin_table("edwards")
    letters = ",".join(table.variables)
    rows = [letters + ",count"] + [",".join([*(table.levels[j][i] for j, i in enumerate(cell)),
                                             str(int(table.counts[cell]))])
                                   for cell in itertools.product(*(range(s) for s in table.shape))]
    path = folder / "own" / "edwards.csv"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(rows) + "\n")
    return path


def test_only_a_sensitive_strategy_on_tables_without_a_sensitive_attribute_is_refused(tmp_path):
    with pytest.raises(tr.TabreleaseError, match="none of the chosen strategies runs on these tables"):
        frontier.run_frontier([str(_housing_file(tmp_path))], [1.0], 2, strategies=("sensitive-attributes",),
                              workloads=(frontier.ALL_TWO_WAY,))


def test_keep_others_with_a_file_keeps_its_rows_and_refuses_other_counts_under_its_name(tmp_path, capsys):
    path = _housing_file(tmp_path / "a")
    out = str(tmp_path / "f")
    common = ["--tables", str(path), "--workloads", "all-2-way", "--epsilon", "1", "--repetitions", "2", "--quiet"]
    assert main(["frontier", "--out", out, "--strategies", "planned,cells", *common]) == 0
    first = pd.read_csv(tmp_path / "f" / "runs.csv")
    # The same table from another folder: the kept rows (cells) and the rerun ones (planned) are the first run's.
    again = _housing_file(tmp_path / "b")
    argv = ["frontier", "--out", out, "--strategies", "planned", "--force", "--keep-others",
            *[str(again) if a == str(path) else a for a in common]]
    assert main(argv) == 0
    second = pd.read_csv(tmp_path / "f" / "runs.csv")
    key = ["strategy", "repetition"]
    pd.testing.assert_frame_equal(first.drop(columns="seconds").sort_values(key).reset_index(drop=True),
                                  second.drop(columns="seconds").sort_values(key).reset_index(drop=True))
    # Other counts under the same name: refused, the folder left as it was.
    (tmp_path / "b" / "my_housing.csv").write_text((tmp_path / "b" / "my_housing.csv").read_text()
                                                   .replace(",21\n", ",22\n", 1))
    capsys.readouterr()
    assert main(argv) == 2
    assert "released another table named 'my_housing' (of another n)" in capsys.readouterr().err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "f" / "runs.csv"), second)


def test_frontier_command_reads_a_file_as_its_input_settings_say(tmp_path, capsys):
    # A semicolon-separated file with its counts in a column named n, and zero cells left out (--sparse): the
    # table the command releases is the one the file describes.
    (tmp_path / "t.csv").write_text("a;b;c;n\n0;0;0;3\n0;1;0;1\n1;0;1;2\n1;1;1;5\n")
    out = tmp_path / "f"
    assert main(["frontier", "--out", str(out), "--tables", str(tmp_path / "t.csv"), "--count-column", "n", "--sparse",
                 "--sep", "semicolon", "--workloads", "all-3-way", "--epsilon", "1", "--repetitions", "2",
                 "--strategies", "cells", "--quiet"]) == 0
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs.table) == {"t"} and set(runs.n) == {11}


def _three_way_file(folder):
    """Housing's first three variables (its counts summed over the fourth), in a long file."""
    table = tr.builtin_table("housing")
    counts = table.counts.sum(axis=3)
    rows = [",".join(table.variables[:3]) + ",count"] + [
        ",".join([*(table.levels[j][i] for j, i in enumerate(cell)), str(int(counts[cell]))])
        for cell in itertools.product(*(range(s) for s in counts.shape))]
    path = folder / "three.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_strategy_that_cannot_be_made_at_a_point_is_left_out_there_and_the_report_says_why(tmp_path, capsys):
    """A new user's trial: on a three-variable table every three-way margin is one margin, which the two rounds of
    rap-adaptive cannot be planned over, and the whole frontier stopped (exit 2, nothing written). Now the others
    run there, and the report names the strategy, the points and the reason; the sensitive strategy, skipped on
    tables without a sensitive attribute, is named too."""
    path = _three_way_file(tmp_path)
    out = tmp_path / "f"
    assert main(["frontier", "--out", str(out), "--tables", str(path), "--workloads", "all-2-way,all-3-way",
                 "--epsilon", "1", "--repetitions", "2", "--strategies",
                 "planned,cells,rap-adaptive,sensitive-attributes", "--quiet"]) == 0
    runs = pd.read_csv(out / "runs.csv")
    made = runs.groupby("workload")["strategy"].unique()
    assert set(made["all-2-way"]) == {"planned", "cells", "rap-adaptive"}
    assert set(made["all-3-way"]) == {"planned", "cells"}
    report = (out / "report.md").read_text()
    assert ("- rap-adaptive (three all-3-way at epsilon 1): rounds x queries per round (2 x 1) must be at most the "
            "number of released margins (1)") in report
    assert "- sensitive-attributes (three all-2-way at epsilon 1; three all-3-way at epsilon 1): the frontier" in report
    # Where nothing chosen can be made at all, the run is refused in one line.
    with pytest.raises(tr.TabreleaseError, match="none of the chosen strategies could be made at any point: "
                                                 "rap-adaptive: rounds x queries"):
        frontier.run_frontier([str(path)], [1.0], 2, strategies=("rap-adaptive",), workloads=(frontier.ALL_THREE_WAY,))


def test_the_progress_bar_ends_at_its_total_where_a_strategy_is_not_run(tmp_path, capsys):
    """The bar counted rap-adaptive's runs on a point where it cannot be made, so it stopped short of its total."""
    path = _three_way_file(tmp_path)
    frontier.run_frontier([str(path)], [1.0], 2, strategies=("cells", "rap-adaptive"),
                          workloads=(frontier.ALL_THREE_WAY,), progress=True)
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert " 4/4 " in last, last  # cells' 2 runs and rap-adaptive's 2, not run there


def test_strategies_that_released_the_same_margins_everywhere_are_one_choice_in_the_report(runs):
    """A new user's trial: where planned released exactly what cells-least-squares did at every point, the report
    said to choose cells-least-squares (the tie broken by the names' order)."""
    same = runs[runs.strategy == "planned"].assign(strategy="cells-least-squares")
    both = pd.concat([runs[runs.strategy.isin(["planned", "cells"])], same], ignore_index=True)
    lines = frontier.comparison(frontier.summarise(both))
    assert any(line.startswith("- so, within this guarantee, planned and cells-least-squares (equal at every point) "
                               "are the ones to choose") for line in lines)
    apart = both[both.strategy != "cells-least-squares"]
    lines = frontier.comparison(frontier.summarise(apart))
    assert not any("equal at every point" in line for line in lines)


def test_the_report_says_each_strategy_s_neighbours_and_compares_classes_only_where_it_ran_several(runs):
    """A review: every report's header said "add-remove neighbours" though sensitive-attributes runs under replace
    ones, and every comparison ended on a sentence about weaker and local guarantees whatever had run."""
    summary = frontier.summarise(runs)
    # Edwards has no sensitive attribute: the strategy's rows stood in for by the planned release's, renamed.
    assert "sensitive-attributes" not in set(summary.strategy)
    assert frontier.strategy("sensitive-attributes").spec.neighbours == "replace"
    summary = pd.concat([summary, summary[summary.strategy == "planned"].assign(strategy="sensitive-attributes")],
                        ignore_index=True)
    assert frontier._units_in_words(summary) == "add-remove neighbours (replace for sensitive-attributes)"
    classes = list(dict.fromkeys(frontier.strategy(n).guarantee for n in summary.strategy))
    assert len(classes) > 1
    lines = frontier.comparison(summary)
    assert lines[-1] == (f"Guarantees are not interchangeable: compare within a class (this run has {len(classes)}: "
                         f"{'; '.join(classes)}).")
    central = summary[summary.strategy.isin(["planned", "cells"])]
    assert frontier._units_in_words(central) == "add-remove neighbours"
    assert not any("Guarantees" in line for line in frontier.comparison(central))


def test_rows_kept_from_an_earlier_run_say_where_a_strategy_was_not_run(runs, tmp_path):
    """A review: rows kept by --keep-others carry no reasons, and the report's ratio table showed 'nan' for
    sensitive-attributes on Edwards with nothing said. The missing points are now listed under Not run, with the
    run's own reason for a sensitive strategy, and the ratio shows 'not run'."""
    kept = runs[runs.strategy.isin(["planned", "cells"])].copy()
    kept = pd.concat([kept, runs[(runs.strategy == "planned")].assign(strategy="sensitive-attributes",
                                                                     table="czech")], ignore_index=True)
    kept.attrs.clear()
    missing = frontier._points_without_rows(kept)
    assert {(t, n) for t, _, _, n, _ in missing} == {("edwards", "sensitive-attributes"), ("czech", "cells"),
                                                     ("czech", "planned")}
    assert {why for t, _, _, n, why in missing if n == "sensitive-attributes"} == {frontier.SENSITIVE_NOT_NAMED}
    assert {why for t, _, _, n, why in missing if n != "sensitive-attributes"} == {
        "no rows of it at this point in runs.csv"}
    frontier.write_frontier(tmp_path, kept, seconds=1.0, command="test")
    report = (tmp_path / "report.md").read_text()
    assert "## Not run" in report and "not run |" in report and "| nan" not in report


def test_an_exact_release_counts_as_the_lowest_error_and_ratios_of_zero_tie(runs):
    """A review's trial: at epsilon 20 the best strategy erred 0, 0/0 made NaN, and the report named a winner at
    1 of 2 points where one strategy was lowest at both, with 'inf' and 'nan' in its checks."""
    summary = frontier.summarise(runs[runs.strategy.isin(["planned", "cells"])])
    summary.loc[summary.strategy == "cells", "max_l1_mean"] = 0.0
    text = "\n".join(frontier.comparison(summary))
    bands = [(0.25, 0.5), (1.0, np.inf)]  # the fixture's epsilons, 0.5 and 2: one band each, two workloads
    for low, high in bands:
        points = summary[(summary.epsilon >= low) & (summary.epsilon <= high)].groupby(
            ["table", "workload", "epsilon"]).ngroups
        assert f"the lowest mean max-L1 error was cells at {points} of {points} " in text
    assert frontier.error_ratio(pd.Series([0.0, 2.0, 0.0]), pd.Series([0.0, 0.0, 4.0])).tolist() == [1.0, np.inf, 0.0]
    assert not frontier.ratios(summary).isna().any().any()


def test_the_frontier_refuses_a_repeated_or_unreleasable_epsilon(tmp_path, capsys):
    """A review's trial: --epsilon 0.1,0.1 counted the same seeded runs twice (their sd shrunk), and 1e-7 (below any
    release's) ran for minutes."""
    for given, said in (("0.1,0.1", "an epsilon appears twice"), ("1e-7", "between 1e-06 and 700")):
        assert main(["frontier", "--out", str(tmp_path / "f"), "--tables", "edwards", "--epsilon", given,
                     "--repetitions", "2", "--strategies", "cells"]) == 2
        assert said in capsys.readouterr().err
    assert not (tmp_path / "f").exists()


def test_a_file_table_s_frontier_is_internal_keeps_only_its_own_counts_and_leaves_no_old_figures(tmp_path, capsys):
    """A review's trials: --keep-others kept the rows of a file whose counts had changed at the same n; the folder of
    a file's frontier was world-readable and unmarked; a rerun on another table left the old figures; and a
    ranking on 2 runs a point said nothing of their error."""
    import stat

    path = _housing_file(tmp_path / "data")
    out = tmp_path / "f"
    argv = ["frontier", "--out", str(out), "--epsilon", "1", "--repetitions", "2", "--workloads", "all-2-way",
            "--quiet"]
    assert main(argv + ["--tables", str(path), "--strategies", "planned,cells"]) == 0
    report = (out / "report.md").read_text()
    assert stat.S_IMODE(out.stat().st_mode) == 0o700 and "Internal: the rows of my_housing are computed" in report
    assert "## Precision" in report and "Each point's mean is over 2 to 2 runs" in report
    assert json.loads((out / frontier.RUN_FILE).read_text()) == {"master_seed": frontier.MASTER_SEED, "tables": {
        "my_housing": tr.tables.counts_digest(tr.load_table(str(path)))}}
    # 300 people moved between two cells: the same n, other counts.
    lines = path.read_text().splitlines()
    first, second = lines[1].rsplit(",", 1), lines[2].rsplit(",", 1)
    moved = min(3, int(first[1]))
    lines[1], lines[2] = f"{first[0]},{int(first[1]) - moved}", f"{second[0]},{int(second[1]) + moved}"
    path.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(argv + ["--tables", str(path), "--strategies", "cells", "--keep-others", "--force"]) == 2
    assert "released other counts as 'my_housing'" in capsys.readouterr().err
    assert (out / "my_housing-all-2-way.svg").is_file()
    assert main(argv + ["--tables", "edwards", "--strategies", "planned,cells", "--force"]) == 0
    assert not (out / "my_housing-all-2-way.svg").exists() and (out / "edwards-all-2-way.svg").is_file()
    assert json.loads((out / frontier.RUN_FILE).read_text())["tables"] == {}
    assert "Internal:" not in (out / "report.md").read_text()


def test_the_frontier_s_seed_is_recorded_and_kept_rows_are_of_it(tmp_path, capsys):
    """A methodologist's trial: the frontier had no --seed (a ranking could not be checked on independent draws),
    and the report printed the default seed whatever the runs. Another seed gives other draws, is in the report and
    frontier.json, and --keep-others refuses rows of another seed."""
    argv = ["frontier", "--tables", "edwards", "--epsilon", "1", "--repetitions", "2", "--workloads", "all-2-way",
            "--strategies", "cells", "--quiet"]
    assert main(argv + ["--out", str(tmp_path / "a")]) == 0
    assert main(argv + ["--out", str(tmp_path / "b"), "--seed", "7"]) == 0
    a, b = (pd.read_csv(tmp_path / name / "runs.csv") for name in "ab")
    assert not np.array_equal(a["max_l1"], b["max_l1"])
    assert "master seed 7)" in (tmp_path / "b" / "report.md").read_text()
    assert json.loads((tmp_path / "b" / frontier.RUN_FILE).read_text())["master_seed"] == 7
    capsys.readouterr()
    assert main(argv[:-3] + ["--strategies", "planned", "--keep-others", "--force", "--out", str(tmp_path / "b")]) == 2
    assert "drawn from another --seed" in capsys.readouterr().err
