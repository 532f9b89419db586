"""Sweeps: deterministic per-run seeds, batched evaluation, resume, parallel and Dask execution."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tabrelease import builtin_table, default_model, evaluate_release, make_grid
from tabrelease.testing import plan_at
from tabrelease.evaluation import evaluate_releases
from tabrelease import ReleaseSpec, loss_of, run_plan, run_sweep
from tabrelease.sweeps import replay_run, run_seed
from tabrelease.errors import TabreleaseError
from tabrelease.noise import SimulationNoise
from tabrelease.sweeps import TIMING_COLUMNS, deterministic_columns, grid_chunks


def small_grid(**kw):
    # The paper's mechanism, named: it has a paper calibration to sweep beside the exact one (the sweep's default
    # mechanism, planned, has none).
    tables = [builtin_table("edwards"), builtin_table("journey_to_work")]
    args = dict(mechanisms=("auto",), calibrations=("exact", "paper"), master_seed=7)
    args.update(kw)
    return make_grid(tables, (0.1, 0.5, 1.0), 3, **args)


def test_run_seeds_depend_on_the_run_not_on_its_place_in_the_grid():
    a = run_seed(7, "edwards", "auto", "exact", 0.5, 2)
    assert a == run_seed(7, "edwards", "auto", "exact", 0.5, 2)
    others = {run_seed(7, "edwards", "auto", "exact", 0.5, 1), run_seed(8, "edwards", "auto", "exact", 0.5, 2),
              run_seed(7, "czech", "auto", "exact", 0.5, 2), run_seed(7, "edwards", "auto", "paper", 0.5, 2),
              run_seed(7, "edwards", "auto", "exact", 0.51, 2)}
    assert a not in others and len(others) == 5
    # A bigger grid gives the shared runs the same rows.
    small = run_sweep(make_grid([builtin_table("edwards")], (0.5,), 2, master_seed=7), progress=False).runs
    big = run_sweep(make_grid([builtin_table("czech"), builtin_table("edwards")], (0.25, 0.5), 2, master_seed=7),
                    progress=False).runs
    shared = big[(big.table == "edwards") & (big.epsilon == 0.5)].reset_index(drop=True)
    pd.testing.assert_frame_equal(deterministic_columns(small), deterministic_columns(shared))


def test_a_single_run_replays_alone():
    grid = small_grid()
    result = run_sweep(grid, progress=False)
    runs = result.runs
    row = runs[(runs.table == "journey_to_work") & (runs.calibration == "paper") & (runs.epsilon == 0.5)].iloc[2]
    # The run id names the mechanism actually run, and the margin errors are long rows under it.
    assert row.run_id == "journey_to_work/efron-stein/paper/0.5/2"
    margin_errors = result.margin_errors[result.margin_errors.run_id == row.run_id]
    assert row.mechanism == "efron-stein" and row.seed == run_seed(grid.master_seed, row.table, row.mechanism,
                                                                     row.calibration, row.epsilon, row.repetition)
    # Replayed by the grid's name for the mechanism and by the row's own (a row once failed to replay that way).
    for mechanism in ("auto", row.mechanism):
        release, evaluation = replay_run(grid, "journey_to_work", mechanism, "paper", 0.5, 2)
        assert evaluation.n_released == row.n_released
        assert evaluation.lp_b == pytest.approx(row.lp_b, rel=1e-12)
        assert evaluation.g2_released == pytest.approx(row.g2_released, rel=1e-9)
        assert evaluation.mle_l1 == pytest.approx(row.mle_l1, rel=1e-9)
        assert dict(zip(margin_errors.margin, margin_errors.l1_error)) == evaluation.l1_error_by_margin


@pytest.mark.unit
def test_batched_evaluation_equals_one_by_one():
    table = builtin_table("rochdale")
    model = default_model(table)
    plan = plan_at(table.shape, model.generators, 0.3)
    releases = [run_plan(plan, table.counts, SimulationNoise(seed)) for seed in range(6)]
    batched = evaluate_releases(table, releases, model)
    for release, ev in zip(releases, batched):
        single = evaluate_release(table, release, model)
        assert ev.g2_released == pytest.approx(single.g2_released, rel=1e-10, abs=1e-10)
        assert ev.mle_l1 == pytest.approx(single.mle_l1, rel=1e-10, abs=1e-12)
        assert ev.l1_error_by_margin == single.l1_error_by_margin
        assert ev.n_released == single.n_released and ev.lp_b == single.lp_b


def test_rows_say_simulation_and_carry_the_calibration():
    runs = run_sweep(small_grid(), progress=False).runs
    assert len(runs) == 2 * 2 * 3 * 3
    assert set(runs.noise_mode) == {"simulation"}
    jtw_paper = runs[(runs.table == "journey_to_work") & (runs.calibration == "paper")]
    assert not jtw_paper.epsilon_holds.any()
    # paper scale = 132 / 100 / epsilon for journey to work (Table 8), exact = (439/256) / epsilon
    np.testing.assert_allclose(jtw_paper.noise_scale * jtw_paper.epsilon, 1.32, rtol=1e-3)
    jtw_exact = runs[(runs.table == "journey_to_work") & (runs.calibration == "exact")]
    np.testing.assert_allclose(jtw_exact.noise_scale * jtw_exact.epsilon, 439 / 256)
    assert (runs.lp_infeasible == (runs.lp_b > 1e-7)).all()
    assert ((runs.n_drift) == (runs.n_released - runs.n)).all()


class Interrupt(Exception):
    pass


def test_an_interrupted_sweep_resumed_gives_the_rows_of_an_uninterrupted_one(tmp_path):
    grid = small_grid()
    whole = run_sweep(grid, tmp_path / "whole", progress=False)
    seen = []

    def stop_after_three(chunk):
        seen.append(chunk.key)
        if len(seen) == 3:
            raise Interrupt

    with pytest.raises(Interrupt):
        run_sweep(grid, tmp_path / "cut", progress=False, on_chunk=stop_after_three)
    assert len(list((tmp_path / "cut" / "chunks").glob("*.margins.parquet"))) == 3  # three grid points, two files each
    assert not (tmp_path / "cut" / "runs.parquet").exists()
    resumed = run_sweep(grid, tmp_path / "cut", resume=True, progress=False)
    assert resumed.computed_runs == grid.runs - 3 * grid.repetitions
    for name in ("runs.parquet", "runs.csv"):
        a = pd.read_parquet(tmp_path / "whole" / name) if name.endswith("parquet") else pd.read_csv(tmp_path / "whole" / name)
        b = pd.read_parquet(tmp_path / "cut" / name) if name.endswith("parquet") else pd.read_csv(tmp_path / "cut" / name)
        pd.testing.assert_frame_equal(deterministic_columns(a), deterministic_columns(b))
        assert set(TIMING_COLUMNS) <= set(a.columns)
    pd.testing.assert_frame_equal(whole.margin_errors, resumed.margin_errors)
    assert not list((tmp_path / "cut").rglob(".tmp-*"))


def test_resume_refuses_a_different_grid_and_a_fresh_run_refuses_a_used_directory(tmp_path):
    run_sweep(small_grid(), tmp_path / "s", progress=False)
    with pytest.raises(TabreleaseError, match="different sweep"):
        run_sweep(small_grid(master_seed=8), tmp_path / "s", resume=True, progress=False)
    with pytest.raises(TabreleaseError, match="already exists"):
        run_sweep(small_grid(), tmp_path / "s", progress=False)
    # --force starts over, deleting what a sweep writes and nothing else.
    (tmp_path / "s" / "notes.txt").write_text("mine")
    (tmp_path / "s" / "runs.csv").write_text("stale")
    forced = run_sweep(small_grid(master_seed=8), tmp_path / "s", force=True, progress=False)
    assert (tmp_path / "s" / "notes.txt").read_text() == "mine"
    assert len(pd.read_csv(tmp_path / "s" / "runs.csv")) == len(forced.runs)


def test_local_processes_give_the_rows_of_one_process():
    grid = small_grid()
    one = run_sweep(grid, jobs=1, progress=False).runs
    two = run_sweep(grid, jobs=2, progress=False).runs
    pd.testing.assert_frame_equal(deterministic_columns(one), deterministic_columns(two))


def test_a_local_dask_cluster_gives_the_rows_of_one_process():
    distributed = pytest.importorskip("distributed")
    grid = small_grid()
    one = run_sweep(grid, jobs=1, progress=False).runs
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        on_dask = run_sweep(grid, jobs=cluster.scheduler_address, progress=False).runs
    pd.testing.assert_frame_equal(deterministic_columns(one), deterministic_columns(on_dask))


def test_an_executor_passed_in_with_threads_sharing_one_worker_gives_the_rows_of_one_process():
    # A plan holds a stateful HiGHS solver: four threads of one Dask worker, and a thread pool, must not share one.
    distributed = pytest.importorskip("distributed")
    from concurrent.futures import ThreadPoolExecutor

    grid = small_grid()
    one = deterministic_columns(run_sweep(grid, jobs=1, progress=False).runs)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=4, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            on_threads = run_sweep(grid, jobs=client, progress=False).runs
            assert client.status == "running"  # an executor passed in is left open
    pd.testing.assert_frame_equal(one, deterministic_columns(on_threads))
    with ThreadPoolExecutor(max_workers=4) as pool:
        pd.testing.assert_frame_equal(one, deterministic_columns(run_sweep(grid, jobs=pool, progress=False).runs))


@pytest.mark.unit
def test_a_grid_has_one_chunk_per_table_calibration_and_epsilon():
    # (the grid's refusals are in tests/test_bad_inputs.py)
    assert len(grid_chunks(small_grid())) == 2 * 2 * 3


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tabrelease", *args], capture_output=True, text=True, cwd=cwd)


def test_cli_sweep_writes_tidy_results_and_resumes(tmp_path):
    out = tmp_path / "sw"
    done = cli("sweep", "czech", "edwards", "--epsilons", "0.5,1", "--repetitions", "2", "--out", str(out),
               "--mechanisms", "auto", "--calibrations", "exact,paper", "--jobs", "1", "--seed", "3")
    assert done.returncode == 0, done.stderr
    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 2 * 2 * 2 * 2 and runs.run_id.is_unique
    errors = pd.read_csv(out / "margin_errors.csv")
    assert set(errors.run_id) == set(runs.run_id)
    again = cli("sweep", "czech", "edwards", "--epsilons", "0.5,1", "--repetitions", "2", "--out", str(out),
                "--mechanisms", "auto", "--calibrations", "exact,paper", "--jobs", "1", "--seed", "3", "--resume")
    assert again.returncode == 0 and "(0 computed now)" in again.stdout
    refused = cli("sweep", "czech", "--epsilons", "0.5", "--repetitions", "2", "--out", str(out))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--resume" in refused.stderr


@pytest.mark.unit
def test_cli_epsilon_ranges():
    from tabrelease.cli._common import epsilon_list

    paper = epsilon_list("0.005:2:0.01")
    assert len(paper) == 200 and paper[0] == 0.005 and paper[-1] == 1.995
    assert epsilon_list("0.1,0.5, 1") == (0.1, 0.5, 1.0)


def test_reproduce_quick(tmp_path, browser):
    out = tmp_path / "paper"
    done = cli("reproduce", "--quick", "--out", str(out), "--jobs", "2", "--quiet")
    assert done.returncode == 0, done.stderr
    for name in ("report.md", "report.html", "summary.csv", "table7.csv", "table8.csv", "reproduction.json",
                 "figure1_sample_size.svg", "figure6_lp_b.svg"):
        assert (out / name).stat().st_size > 0
    # The report as a person sees it: no table runs off the page (Table 8 did), and all six figures load.
    from .browser import page_problems

    found = page_problems(browser, out / "report.html")
    assert found["problems"] == [] and found["figures"] == 6
    # Each figure's text as the report shows it (at its own width): none below 10 px.
    for figure in sorted(out.glob("figure*.svg")):
        page = tmp_path / f"{figure.stem}.html"
        page.write_text(f"<html><body>{figure.read_text()}</body></html>")
        found = page_problems(browser, page)
        assert found["problems"] == [] and found["smallest_figure_text"]["px"] >= 10, figure.name
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.calibration) == {"exact", "paper"} and summary.runs.eq(8).all()
    # Figure 1's claim, from the runs themselves: more noise, more spread in n'.
    jtw = summary[(summary.table == "journey_to_work") & (summary.calibration == "exact")].sort_values("epsilon")
    assert jtw.n_released_sd.iloc[0] > 10 * jtw.n_released_sd.iloc[-1]
    table7 = pd.read_csv(out / "table7.csv").set_index("table")
    assert table7.loc["journey_to_work", "g2_tool"] == pytest.approx(262.93, abs=0.01)
    assert table7.loc["journey_to_work", "g2_paper"] == pytest.approx(365.82)
    report = (out / "report.md").read_text()
    assert "reproduction preset" in report and "simulation" in report and "1.30" in report
    # --force deletes exactly what a reproduction writes: the list is complete, and other files stay.
    from tabrelease._files import remove_own_outputs
    from tabrelease.paper.reproduce import REPRODUCTION_OUTPUTS

    assert sorted(p.name for p in out.iterdir()) == sorted(REPRODUCTION_OUTPUTS)
    (out / ".gitignore").write_text("sweep/chunks/\n")
    remove_own_outputs(out, REPRODUCTION_OUTPUTS)
    assert [p.name for p in out.iterdir()] == [".gitignore"]


def test_gaussian_is_swept_beside_laplace_mechanisms(tmp_path):
    # A delta goes to the mechanisms that take one, as `release` gives it (the planned mechanism turns Gaussian);
    # the others run at pure epsilon in the same sweep.
    table = builtin_table("edwards")
    spec = ReleaseSpec(loss=loss_of(1.0, 1e-6), mode="simulation")
    grid = make_grid([table], [0.5, 1.0], 2, spec=spec, mechanisms=["planned", "fourier", "gaussian"])
    result = run_sweep(grid, tmp_path / "s", jobs=1, progress=False)
    runs = result.runs.set_index("mechanism")
    for name in ("gaussian", "planned"):
        assert runs.loc[name, "delta"].eq(1e-6).all() and runs.loc[name, "noise_distribution"].eq("gaussian").all()
    assert runs.loc["fourier", "delta"].isna().all() and runs.loc["fourier", "noise_distribution"].eq("laplace").all()
    # Replayed alone, a Gaussian run is the same release.
    row = result.runs[result.runs.mechanism == "gaussian"].iloc[0]
    release, ev = replay_run(grid, "edwards", "gaussian", "exact", row.epsilon, int(row.repetition))
    assert ev.max_l1_error == pytest.approx(row.max_l1_error) and release.noise.delta == 1e-6
    with pytest.raises(TabreleaseError, match="none of this sweep's mechanisms"):
        make_grid([table], [1.0], 1, spec=spec, mechanisms=["fourier", "cells"])


def test_sweep_command_writes_summary_and_figures(tmp_path, browser):
    out = tmp_path / "s"
    done = cli("sweep", "edwards", "--epsilons", "0.5,1", "--repetitions", "3", "--mechanisms", "planned,fourier",
               "--out", str(out), "--jobs", "1", "--quiet", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["runs"] == 12 and doc["noise_mode"] == "simulation"
    names = {p.rsplit("/", 1)[-1] for p in doc["files"]}
    assert {"summary.csv", "max_l1_error.svg", "n_drift.svg", "runs.csv"} <= names
    summary = pd.read_csv(out / "summary.csv")
    runs = pd.read_csv(out / "runs.csv")
    assert set(summary.noise_mode) == set(runs.noise_mode) == {"simulation"}  # every row says what made it
    # The summary's figures are those of the runs (recomputed here with pandas, independently of the grouping).
    point = runs[(runs.mechanism == "fourier") & (runs.epsilon == 0.5)]
    row = summary[(summary.mechanism == "fourier") & (summary.epsilon == 0.5)].iloc[0]
    assert row.runs == 3 and row.max_l1_error_median == pytest.approx(point.max_l1_error.median())
    assert row.n_drift_q90 == pytest.approx(np.quantile(point.n_drift, 0.9))
    # Every figure is a real SVG that a browser can show.
    from .browser import page_problems

    page = out / "figures.html"
    page.write_text("".join(f'<img alt="{n}" src="{n}">' for n in sorted(names) if n.endswith(".svg")))
    found = page_problems(browser, page)
    assert found["figures"] >= 2 and not [p for p in found["problems"] if "did not load" in p]


def test_progress_moves_before_the_first_grid_point_is_done(capsys, monkeypatch):
    # The bar names what is under way at once, and its clock ticks while the first grid point is computed
    # (made slow here: a grid point's worker sleeps 1.2 s before it starts).
    import time
    from concurrent.futures import ThreadPoolExecutor

    from tabrelease.sweeps import driver

    real = driver.run_chunk

    def slow(chunk):
        time.sleep(1.2)
        return real(chunk)

    monkeypatch.setattr(driver, "run_chunk", slow)
    grid = make_grid([builtin_table("edwards")], [1.0], 4, mechanisms=["planned"])
    with ThreadPoolExecutor(1) as pool:
        run_sweep(grid, None, jobs=pool, progress=True)
    err = capsys.readouterr().err
    assert "planning and starting" in err and "grid points (4 runs) to come" in err


_ORPHAN_SCRIPT = '''
import os, sys, time
from pathlib import Path

def busy(flags):
    Path(flags, str(os.getpid())).touch()  # this worker has started (its initializer has run)
    time.sleep(600)  # a grid point that would take ten minutes

if __name__ == "__main__":
    from tabrelease.sweeps.driver import local_executor

    pool = local_executor(2)
    futures = [pool.submit(busy, sys.argv[1]) for _ in range(2)]
    time.sleep(600)
'''


def _gone(pid: int) -> bool:
    """The process has ended (a zombie nobody has reaped yet counts as ended: it computes nothing)."""
    import os

    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and /proc are POSIX")
def test_workers_end_when_the_sweep_is_killed(tmp_path):
    # A sweep killed outright (SIGKILL: nothing of it runs) used to leave its workers computing for minutes.
    import os
    import time

    script, flags = tmp_path / "sweep_like.py", tmp_path / "started"
    script.write_text(_ORPHAN_SCRIPT)
    flags.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    parent = subprocess.Popen([sys.executable, str(script), str(flags)], env=env)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 120  # generous: a loaded machine starts processes slowly
        while len(workers) < 2 and time.monotonic() < deadline and parent.poll() is None:
            time.sleep(0.05)
            workers = [int(p.name) for p in flags.iterdir()]
        assert len(workers) == 2, "the workers did not start"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 60
        while not all(_gone(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in workers), "workers outlived their killed sweep"
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in workers:
            if not _gone(pid):
                os.kill(pid, 9)


_WATCHER_SCRIPT = '''
import os, sys, time
if sys.argv[2] == "poll":
    del os.pidfd_open  # the portable path: poll whether the sweep's process exists
from tabrelease.sweeps.worker import exit_with_sweep

exit_with_sweep(int(sys.argv[1]))
open(sys.argv[3], "w").close()
time.sleep(600)
'''


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("way", ["pidfd", "poll"])
def test_a_worker_watching_its_sweep_ends_when_the_sweep_ends(tmp_path, way):
    import os
    import time

    if way == "pidfd" and not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd on this platform")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    sweep = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    ready = tmp_path / "watching"
    worker = subprocess.Popen([sys.executable, "-c", _WATCHER_SCRIPT, str(sweep.pid), way, str(ready)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists() and worker.poll() is None  # it watches, and lives while the sweep does
        sweep.kill()
        sweep.wait()
        assert worker.wait(timeout=60) == 1
    finally:
        for proc in (sweep, worker):
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_sweep_takes_sensitive_attributes_by_the_names_the_public_files_use():
    """`sweep --sensitive class` on Titanic (its variable A, "class" in every public file) was refused as "not a
    variable of this table", though `sweep --help` said it takes names for people, as `release` does. It is now the
    sweep of --sensitive A: the same rows."""
    from tabrelease.spec import SIMULATION, unit_of

    def rows(sensitive):
        spec = ReleaseSpec(loss=loss_of(1.0), mode=SIMULATION, seed=0, unit=unit_of("replace", sensitive))
        grid = make_grid([builtin_table("titanic")], (0.5, 1.0), 2, mechanisms=("sensitive-attributes",), spec=spec,
                         master_seed=3)
        return deterministic_columns(run_sweep(grid, progress=False).runs)

    pd.testing.assert_frame_equal(rows("class"), rows("A"))
    with pytest.raises(TabreleaseError, match="--sensitive names 'klass', which is not a variable"):
        rows("klass")


def test_a_workload_that_names_no_variable_sweeps_every_table_at_its_own_margins(tmp_path, capsys):
    """A new user's trial: several tables with --margins all-2-way were refused ('--margins applies to a sweep over
    one table'). A workload such as all-2-way is each table's own: every two-way margin of each."""
    import pandas as pd

    from tabrelease.cli import main

    out = tmp_path / "s"
    assert main(["sweep", "edwards", "titanic", "--margins", "all-2-way", "--epsilons", "1", "--repetitions", "1",
                 "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["table"]) == {"edwards", "titanic"}
    margins = pd.read_csv(out / "margin_errors.csv")
    counted = margins.assign(table=margins["run_id"].str.split("/").str[0]).groupby("table")["margin"].nunique()
    assert counted.to_dict() == {"edwards": 15, "titanic": 6}  # C(6, 2) and C(4, 2)


def test_a_sweep_s_folder_is_owner_only_and_says_it_is_internal(tmp_path):
    """A reviewer's trial: a sweep of a confidential file wrote the true n and the original table's G2 to a
    world-readable runs.csv, nothing marking it internal. A folder the sweep makes is owner-only (0700, as a
    bundle's), and sweep.json says what its outputs are; a resume still accepts it."""
    import stat

    from tabrelease.sweeps.driver import INTERNAL_NOTE

    run_sweep(small_grid(), tmp_path / "s", progress=False)
    assert stat.S_IMODE((tmp_path / "s").stat().st_mode) == 0o700
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["internal"] == INTERNAL_NOTE
    assert "true counts" in INTERNAL_NOTE and "not for publication" in INTERNAL_NOTE
    run_sweep(small_grid(), tmp_path / "s", resume=True, progress=False)


def test_a_file_named_as_a_built_in_table_but_holding_other_counts_is_refused(tmp_path, capsys):
    """A methodologist's trial: `sweep data/rochdale.csv` (holding another table) labelled every run, summary row and
    figure "rochdale"; the frontier refuses such a file, and now the sweep does too."""
    import itertools

    from tabrelease.cli import main

    table = builtin_table("housing")
    rows = ["A,B,C,D,count"] + [",".join([*(table.levels[j][i] for j, i in enumerate(cell)),
                                          str(int(table.counts[cell]))])
                                for cell in itertools.product(*(range(s) for s in table.shape))]
    (tmp_path / "rochdale.csv").write_text("\n".join(rows) + "\n")
    assert main(["sweep", str(tmp_path / "rochdale.csv"), "--epsilons", "1", "--repetitions", "1", "--out",
                 str(tmp_path / "s")]) == 2
    assert "is named 'rochdale', as a built-in table is, but holds other counts" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_a_bad_file_among_several_tables_is_named(tmp_path, capsys):
    """A methodologist's trial: with several tables, "no count column 'count'" said which file in no way."""
    from tabrelease.cli import main

    (tmp_path / "nocount.csv").write_text("a,b,n\nx,y,1\n")
    assert main(["sweep", "rochdale", str(tmp_path / "nocount.csv"), "--epsilons", "1", "--repetitions", "1",
                 "--out", str(tmp_path / "s")]) == 2
    assert capsys.readouterr().err.startswith(f"tabrelease: error: {tmp_path / 'nocount.csv'}: no count column")


def test_sweep_json_names_each_margin_s_variables(tmp_path):
    """A methodologist's trial: margin_errors.csv names margins by letters ([AC]) and nothing in the folder said
    which variables they are."""
    run_sweep(small_grid(), tmp_path / "s", progress=False)
    named = json.loads((tmp_path / "s" / "sweep.json").read_text())["margin_names"]
    errors = pd.read_csv(tmp_path / "s" / "margin_errors.csv")
    grid = small_grid()
    for table in grid.tables:
        assert set(named[table.name]) == set(errors.loc[errors.run_id.str.startswith(table.name + "/"), "margin"])
    table = grid.tables[0]
    label, names = next(iter(named[table.name].items()))
    assert names == [tr_people(table)[j] for j in [table.letters.index(ch) for ch in label.strip("[]")]]


def tr_people(table):
    from tabrelease.tables import people_names

    return people_names(table)[0]
