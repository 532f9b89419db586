"""Fault injection: SIGKILL, SIGTERM and SIGINT at random moments of `release` and `batch`, and what is left.

    PYTHONPATH=src python benchmarks/kill_trials.py [--trials 50] [--seed 1] [--out-report PATH]

Each trial, in a fresh folder: a ledger made with `tabrelease ledger init` in a parent folder; then either a
`release` of a built-in table (--simulate, --ledger, --out PARENT/r) or a `batch` of three such releases against
the same ledger (its spec kept outside the parent); a signal at a delay drawn uniformly over the command's
typical wall time (measured first, on three runs of each that are not interrupted, and tracked over the run by
the clean-up releases, since the machine's load changes); then the checks:

(a) the exit status is never SIGABRT's (-6 or 134), nothing says the interpreter aborted, and no core file
    appears (the script raises its core size limit, which the commands inherit, so that only the tool's own
    limit keeps one off the disk);
(b) after a clean-up pass (the next run of the tool: one more `release` into the same parent, which removes
    what dead processes left), the parent holds nothing but completed bundles, the ledger, its key, anchor and
    lock: no staging folder, no temporary file;
(c) `ledger verify L --bundles <every bundle in the parent>` finds no bundle without its charge; a charge
    without a bundle is allowed only when it is marked failed, or after SIGKILL;
(d) SIGTERM or SIGINT after a charge whose bundle was not written: exit status 4, the failure recorded in the
    ledger, and standard error saying "charged ... the release failed"; before any such charge: 130/143 (or
    the signal's own status, before the tool's handlers exist), or 2, with every charge's bundle in place;
    a bundle in place is never marked failed;
(e) the ledger verifies intact.

The phase a trial reached is read from the ledger (its release records, and which are marked failed) and from
the bundles on disk. Violations are listed trial by trial, then a summary table by signal and phase.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
if str(SRC) not in sys.path:  # the ledger is read with the library itself
    sys.path.insert(0, str(SRC))

SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "INT": signal.SIGINT}
COMMANDS = ("release", "batch")
LEDGER = "L.json"
# What the parent may hold besides bundles.
LEDGER_FILES = {LEDGER, f"{LEDGER}.key", f"{LEDGER}.anchor", f"{LEDGER}.lock"}
BUNDLE_FILES = ("public/release.json", "internal/audit.json", "internal/audit.html", "internal/charge.json")
BATCH_OUTS = ("b1", "b2", "b3")
BATCH_SPEC = """\
ledger = "parent/L.json"

[datasets.czech]
builtin = "czech"

[datasets.housing]
builtin = "housing"

[[releases]]
dataset = "czech"
margins = "[AB][BC]"
epsilon = 0.5
out = "parent/b1"
simulate = true

[[releases]]
dataset = "housing"
epsilon = 1.0
out = "parent/b2"
simulate = true

[[releases]]
dataset = "czech"
margins = "[DE]"
epsilon = 0.25
out = "parent/b3"
simulate = true
"""
# The phases a trial can reach, in order.
NOT_CHARGED = "not charged"
CHARGED = "charged, no bundle"
BETWEEN = "between releases"
PUBLISHED = "all published"
PHASES = (NOT_CHARGED, CHARGED, BETWEEN, PUBLISHED)
DEADLINE_SECONDS = 300  # generous: a trial's command, waited for after its signal


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def _tool(*args: str) -> list[str]:
    return [sys.executable, "-m", "tabrelease", *args]


def allow_core_files() -> None:
    """Raise this process's core size limit to its hard limit, which the commands it starts inherit: then only
    the tool's own limit keeps a core file off the disk."""
    import resource

    try:
        _, hard = resource.getrlimit(resource.RLIMIT_CORE)
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))
    except (ValueError, OSError):
        pass


def deliverable_sigint() -> None:
    """A process started with SIGINT ignored (a background job of a shell script, nohup) starts its children with it
    ignored, and Python then installs no handler for it: a SIGINT trial would test nothing. Called in the main
    thread: with a handler here, the children start with the default."""
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, None):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def command_for(kind: str, workdir: Path) -> list[str]:
    parent = workdir / "parent"
    if kind == "release":
        return _tool("release", "czech", "--epsilon", "1", "--simulate", "--ledger", str(parent / LEDGER),
                     "--out", str(parent / "r"))
    return _tool("batch", str(workdir / "spec.toml"))


def prepare(kind: str, workdir: Path) -> None:
    """A fresh parent folder with an empty ledger (made by the tool), and the batch's spec beside the parent."""
    parent = workdir / "parent"
    parent.mkdir(parents=True)
    subprocess.run(_tool("ledger", "init", str(parent / LEDGER)), env=_env(), check=True, capture_output=True)
    if kind == "batch":
        (workdir / "spec.toml").write_text(BATCH_SPEC)


def staging_appeared(pattern: str = r"\.(r|b\d)\.staging-\d+-(?!probe-|old-)") -> "callable":
    """A moment for `run_trial`: a release's staging folder exists in the parent (the bundle is being written,
    after its charge)."""
    regex = re.compile(pattern)

    def appeared(parent: Path) -> bool:
        try:
            return any(regex.match(p.name) for p in parent.iterdir())
        except FileNotFoundError:
            return False

    appeared.label = "staging seen"
    return appeared


@dataclass
class Trial:
    number: int
    command: str
    signal: str
    moment: str  # "after 1.23 s" or what was waited for
    status: int | None = None
    stderr: str = ""
    phase: str = ""
    charges: int = 0
    bundles: int = 0
    failed: int = 0
    unmarked_orphans: int = 0  # charges with no bundle and no failure record
    sent: bool = True  # False: the command had finished before its moment came
    window: float | None = None  # the command's typical wall time when the delay was drawn
    cleanup_seconds: float | None = None  # the clean-up release's wall time
    residue_before: list[str] = field(default_factory=list)
    residue_after: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _residue(parent: Path) -> list[str]:
    """What the parent holds besides completed bundles and the ledger's files."""
    out = []
    for p in sorted(parent.iterdir()):
        if p.name in LEDGER_FILES:
            continue
        if p.is_dir() and not p.is_symlink() and all((p / f).is_file() for f in BUNDLE_FILES) \
                and not p.name.startswith("."):
            continue
        out.append(p.name + ("/" if p.is_dir() else ""))
    return out


def _bundle_mac(folder: Path) -> str | None:
    try:
        return json.loads((folder / "internal" / "charge.json").read_text()).get("mac")
    except (OSError, ValueError, AttributeError):
        return None


def _core_files(*folders: Path) -> list[str]:
    found = []
    for folder in folders:
        if folder.is_dir():
            found += [str(p) for p in folder.iterdir() if p.name == "core" or re.fullmatch(r"core\.\d+", p.name)]
    return found


def run_trial(number: int, kind: str, signame: str, workdir: Path, *, delay: float | None = None,
              wait_for=None, cleanup: str = "release", deadline: float = DEADLINE_SECONDS) -> Trial:
    """One trial in `workdir` (made fresh): start the command, signal it at `delay` seconds or once `wait_for(parent)`
    is true (then at once), wait for its exit, clean up as the next run would, and check (a)-(e). `cleanup` is
    "release" (the next run of the tool: one more release into the parent) or "function" (the library's
    `remove_stale_staging`, which that run calls)."""
    from tabrelease.ledger import ledger_entries

    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    prepare(kind, workdir)
    parent = workdir / "parent"
    ledger = parent / LEDGER
    sig = SIGNALS[signame]
    if sig == signal.SIGINT and signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, None):
        raise RuntimeError("SIGINT is ignored in this process, and would be in the command: call deliverable_sigint()")
    trial = Trial(number, kind, signame, f"after {delay:.2f} s" if wait_for is None else wait_for.label)
    start = time.monotonic()
    proc = subprocess.Popen(command_for(kind, workdir), cwd=workdir, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        if wait_for is None:
            time.sleep(delay)
        else:
            while not wait_for(parent) and proc.poll() is None and time.monotonic() - start < deadline:
                time.sleep(0.002)
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        else:
            trial.sent = False
        _, trial.stderr = proc.communicate(timeout=deadline)
    finally:
        if proc.poll() is None:  # past every deadline: stop it, and say so
            proc.kill()
            proc.communicate()
            trial.violations.append("the command did not exit within the deadline after its signal")
    trial.status = proc.returncode
    trial.seconds = time.monotonic() - start
    v = trial.violations

    # (a) no abort, no core file.
    if trial.status in (-signal.SIGABRT, 128 + signal.SIGABRT):
        v.append(f"exit status {trial.status}: SIGABRT")
    if re.search(r"Fatal Python error|Aborted|core dumped", trial.stderr):
        v.append("standard error says the interpreter aborted: " + _first_line(trial.stderr, "Fatal|Abort|core"))
    cores = _core_files(workdir, parent)
    if cores:
        v.append(f"core file(s) written: {', '.join(cores)}")
    if not trial.sent and trial.status != 0:
        v.append(f"the command ended by itself, before its signal, with exit status {trial.status}: "
                 f"{_first_line(trial.stderr)}")
    elif signame == "KILL" and trial.status not in (-signal.SIGKILL, 0):
        v.append(f"exit status {trial.status} after SIGKILL")

    # The phase reached, from the ledger and the bundles (before the clean-up run adds its own).
    try:
        entries = ledger_entries(ledger)
    except Exception as exc:  # noqa: BLE001 - an unreadable ledger is a finding, not a crash of the harness
        v.append(f"the ledger cannot be read after the signal: {type(exc).__name__}: {exc}")
        entries = []
    trial.charges = len(entries)
    orphans = []
    for e in entries:
        bundle = Path(e["output"])
        published = bundle.is_dir() and _bundle_mac(bundle) == e["mac"]
        trial.bundles += published
        trial.failed += bool(e["failed"])
        if published and e["failed"]:
            v.append(f"the bundle {bundle.name} is in place but its charge (record {e['sequence']}) is marked "
                     f"failed ({e['failed']})")
        if not published:
            orphans.append(e)
    trial.unmarked_orphans = sum(1 for e in orphans if not e["failed"])
    expected = 1 if kind == "release" else len(BATCH_OUTS)
    if not entries:
        trial.phase = NOT_CHARGED
    elif orphans:
        trial.phase = CHARGED
    elif trial.bundles < expected:
        trial.phase = BETWEEN
    else:
        trial.phase = PUBLISHED
    bundles_on_disk = {p.name for p in parent.iterdir() if p.is_dir() and (p / "internal" / "charge.json").exists()
                       and not p.name.startswith(".")}
    if len(bundles_on_disk) != trial.bundles:
        v.append(f"{len(bundles_on_disk)} bundle folder(s) on disk, {trial.bundles} with their charge")

    # (d) what a catchable signal must give.
    if signame in ("TERM", "INT"):
        status = trial.status
        if orphans:
            if status != 4:
                v.append(f"a charge without its bundle (phase {trial.phase}), and exit status {status}, not 4")
            if not re.search(r"charged .*the release failed", trial.stderr):
                v.append("a charge without its bundle, and standard error does not say 'charged ... the release "
                         "failed'" + (f" (it says: {_first_line(trial.stderr)})" if trial.stderr.strip() else
                                      " (it is empty)"))
            if trial.unmarked_orphans:
                v.append(f"{trial.unmarked_orphans} charge(s) without a bundle and without a failure record")
        else:
            allowed = {128 + sig, -sig, 2} | ({0} if trial.phase == PUBLISHED else set())
            if status not in allowed:
                v.append(f"exit status {status} with every charge published (allowed: {sorted(allowed)})")
            if status == 4:
                v.append("exit status 4 though every charge has its bundle")
        trial.residue_before = _residue(parent)
        if trial.residue_before:  # README: a release being written is removed on the way out
            v.append(f"left in the parent on the way out of {signame}: {', '.join(trial.residue_before)}")
    else:
        trial.residue_before = _residue(parent)

    # (b) the clean-up pass, then nothing but bundles and the ledger's files.
    if cleanup == "release":
        cleanup_start = time.monotonic()
        done = subprocess.run(_tool("release", "czech", "--epsilon", "1", "--simulate", "--ledger", str(ledger),
                                    "--out", str(parent / "clean")), cwd=workdir, env=_env(), capture_output=True,
                              text=True, timeout=deadline)
        trial.cleanup_seconds = time.monotonic() - cleanup_start
        if done.returncode != 0:
            v.append(f"the clean-up release failed (exit {done.returncode}): {_first_line(done.stderr)}")
    else:
        from tabrelease.bundle import remove_stale_staging

        remove_stale_staging(parent / "clean")
    trial.residue_after = _residue(parent)
    if trial.residue_after:
        v.append(f"left in the parent after the clean-up pass: {', '.join(trial.residue_after)}")

    # (c) and (e): the ledger intact, every bundle with its charge; a charge without a bundle only as allowed.
    bundles = sorted(str(p) for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))
    verify = subprocess.run(_tool("ledger", "verify", str(ledger), *(["--bundles", *bundles] if bundles else [])),
                            cwd=workdir, env=_env(), capture_output=True, text=True, timeout=deadline)
    lines = verify.stdout.splitlines()
    if not bundles and verify.returncode == 0:  # `--bundles` needs one: the library lists the charges without one
        from tabrelease.ledger import verify_bundles

        lines += [f"FAILED: {problem}" for problem in verify_bundles(ledger, [])]
    chain_broken = verify.returncode != 0 and not any("between the ledger and the bundles" in s for s in lines)
    if chain_broken or verify.returncode not in (0, 6):  # 6: a problem found (LedgerIntegrityError.exit_status)
        v.append(f"the ledger does not verify intact: {_first_line(verify.stdout + verify.stderr)}")
    failed_lines = [s for s in lines if s.startswith("FAILED:")]
    no_bundle = [s for s in failed_lines if "has no bundle among those given" in s]
    if not chain_broken:
        for s in failed_lines:
            if s not in no_bundle:
                v.append(f"a bundle without its charge: {s[len('FAILED: '):]}")
    if len(no_bundle) != trial.unmarked_orphans:
        v.append(f"verify lists {len(no_bundle)} charge(s) without a bundle, the ledger has "
                 f"{trial.unmarked_orphans} unmarked")
    if no_bundle and signame != "KILL":
        v.append(f"a charge without a bundle or failure record after SIG{signame}")
    return trial


def _first_line(text: str, pattern: str | None = None) -> str:
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    if pattern:
        lines = [s for s in lines if re.search(pattern, s)] or lines
    return lines[-1] if lines else ""


def measure_duration(kind: str, root: Path, runs: int = 3) -> float:
    """Wall time of a run that is not interrupted (each must succeed): the median of `runs`."""
    walls = []
    for _ in range(runs):
        workdir = root / f"measure-{kind}"
        if workdir.exists():
            shutil.rmtree(workdir)
        workdir.mkdir(parents=True)
        prepare(kind, workdir)
        start = time.monotonic()
        subprocess.run(command_for(kind, workdir), cwd=workdir, env=_env(), check=True, capture_output=True)
        walls.append(time.monotonic() - start)
        shutil.rmtree(workdir)
    return statistics.median(walls)


def summary(trials: list[Trial], durations: dict[str, float] | None = None, seed: int | None = None,
            cleanup: str = "release") -> str:
    windows = [t.window for t in trials if t.window is not None]
    when = ("signal at a delay uniform over the command's typical wall time (measured first: "
            + ", ".join(f"{k} {s:.2f} s" for k, s in durations.items())
            + (f"; tracked over the run from the clean-up releases: windows {min(windows):.2f} to "
               f"{max(windows):.2f} s" if windows else "") + ")") if durations else "signal at fixed moments"
    out = [f"kill trials: {len(trials)}" + ("" if seed is None else f" (seed {seed})"), when,
           "clean-up pass: " + ("one more release into the same parent" if cleanup == "release" else
                                "remove_stale_staging, as the next run calls it")
           + "; checks (a)-(e) of benchmarks/kill_trials.py", ""]
    width = max(len(p) for p in PHASES)
    header = f"{'command':<8} {'phase reached':<{width}} " + " ".join(f"{s:>5}" for s in SIGNALS) + "  total"
    out.append("trials by command, phase reached and signal")
    out.append(header)
    out.append("-" * len(header))
    for kind in COMMANDS:
        for phase in PHASES:
            counts = [sum(1 for t in trials if t.command == kind and t.phase == phase and t.signal == s)
                      for s in SIGNALS]
            if sum(counts):
                out.append(f"{kind:<8} {phase:<{width}} " + " ".join(f"{c:>5}" for c in counts) + f"  {sum(counts):>5}")
    totals = [sum(1 for t in trials if t.signal == s) for s in SIGNALS]
    out.append(f"{'all':<8} {'':<{width}} " + " ".join(f"{c:>5}" for c in totals) + f"  {sum(totals):>5}")
    out.append("")
    out.append("exit statuses (status x trials)")
    for s in SIGNALS:
        statuses = Counter(t.status for t in trials if t.signal == s)
        if statuses:
            ordered = sorted(statuses.items(), key=lambda item: (item[0] is None, item[0] or 0))
            out.append(f"  SIG{s:<5} " + ", ".join(f"{status} x {n}" for status, n in ordered))
    failed = sum(t.failed for t in trials)
    unmarked = sum(t.unmarked_orphans for t in trials)
    charges, bundles = sum(t.charges for t in trials), sum(t.bundles for t in trials)
    out.append(f"charges: {charges}, bundles with their charge: {bundles}, "
               f"charges marked failed: {failed}, charges without bundle or failure record (SIGKILL only): {unmarked}")
    late = [t for t in trials if not t.sent]
    out.append(f"commands that finished before their signal (none sent): {len(late)}"
               + (" (" + ", ".join(f"{s} {sum(1 for t in late if t.signal == s)}" for s in SIGNALS) + ")"
                  if late else ""))
    left = sum(1 for t in trials if t.residue_before)
    out.append(f"trials that left something before the clean-up pass: {left} (SIGKILL: "
               f"{sum(1 for t in trials if t.residue_before and t.signal == 'KILL')}); after it: "
               f"{sum(1 for t in trials if t.residue_after)}")
    bad = [t for t in trials if t.violations]
    out.append(f"violations: {sum(len(t.violations) for t in trials)} in {len(bad)} of {len(trials)} trials")
    for t in bad:
        out.append(f"  trial {t.number} ({t.command}, SIG{t.signal} {t.moment}, phase {t.phase}, exit {t.status}):")
        out += [f"    - {s}" for s in t.violations]
    out.append("")
    out.append("trials")
    out.append(f"{'#':>3} {'command':<8} {'signal':<6} {'moment':<20} {'exit':>5} {'phase reached':<{width}} "
               f"{'charges':>7} {'bundles':>7} {'failed':>6} {'left before clean-up':<22} violations")
    for t in trials:
        moment = t.moment if t.sent else f"{t.moment}, done"
        out.append(f"{t.number:>3} {t.command:<8} {t.signal:<6} {moment:<20} {str(t.status):>5} {t.phase:<{width}} "
                   f"{t.charges:>7} {t.bundles:>7} {t.failed:>6} {(', '.join(t.residue_before) or '-')[:22]:<22} "
                   f"{len(t.violations)}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out-report", metavar="PATH", help="also write the summary here "
                        "(e.g. reports/benchmarks/kill_trials.txt)")
    parser.add_argument("--keep", action="store_true", help="keep the trials' folders (printed at the end)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    allow_core_files()
    deliverable_sigint()
    root = Path(tempfile.mkdtemp(prefix="kill-trials-"))
    try:
        durations = {kind: measure_duration(kind, root) for kind in COMMANDS}
        # The machine's load changes over a run: each trial's clean-up release (the same command as a trial's
        # release) measures the release's wall time again; the window is the median of the last five, and the
        # batch's is the release's times the ratio measured first.
        recent = deque(maxlen=5)
        # Every signal and command equally often (as far as the number of trials allows), in a random order.
        plan = [(COMMANDS[(i // len(SIGNALS)) % len(COMMANDS)], list(SIGNALS)[i % len(SIGNALS)])
                for i in range(args.trials)]
        rng.shuffle(plan)
        trials = []
        for number, (kind, signame) in enumerate(plan, 1):
            release = statistics.median(recent) if recent else durations["release"]
            window = release * (1 if kind == "release" else durations["batch"] / durations["release"])
            delay = rng.uniform(0, window)
            trial = run_trial(number, kind, signame, root / f"trial-{number}", delay=delay)
            trial.window = window
            trial.moment = f"{delay:.2f} of {window:.2f} s"
            if trial.cleanup_seconds is not None:
                recent.append(trial.cleanup_seconds)
            trials.append(trial)
            print(f"trial {number:>3}: {kind:<7} SIG{signame:<4} after {delay:5.2f} s -> exit {trial.status}, "
                  f"{trial.phase}; {len(trial.violations)} violation(s)", file=sys.stderr, flush=True)
            if not args.keep:
                shutil.rmtree(root / f"trial-{number}", ignore_errors=True)
        report = summary(trials, durations, args.seed)
    finally:
        if args.keep:
            print(f"trials kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(report, end="")
    if args.out_report:
        Path(args.out_report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out_report).write_text(report)
    return 1 if any(t.violations for t in trials) else 0


if __name__ == "__main__":
    sys.exit(main())
