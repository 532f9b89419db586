"""Writing files so that a reader never sees half of one: write beside the target, then rename."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path


TEMPORARY_PREFIX = ".tmp-"


def temporary_path(path: Path) -> Path:
    """A temporary name beside `path`, unique per process and thread, so that two writers never share (or delete)
    one."""
    path = Path(path)
    return path.with_name(f"{TEMPORARY_PREFIX}{os.getpid()}-{threading.get_ident()}-{path.name}")


def process_alive(pid: int) -> bool:
    """Whether a process with this id exists (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_dead_temporaries(folder: Path) -> list[Path]:
    """Temporary files this tool left in `folder` from processes that are gone (killed mid-write): removed and
    returned. Each is named with its writer's process id, so a live writer's file is never touched."""
    removed = []
    for candidate in Path(folder).glob(f"{TEMPORARY_PREFIX}*"):
        try:
            pid = int(candidate.name[len(TEMPORARY_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not process_alive(pid) and (candidate.is_file() or candidate.is_symlink()):
            try:
                candidate.unlink()
                removed.append(candidate)
            except OSError:
                pass
    return removed


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call write(temporary path) in the target's folder, then rename it over `path`; no temporary file is left."""
    path = Path(path)
    tmp = temporary_path(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda tmp: tmp.write_text(text))


def write_frame_atomic(frame, path: Path) -> None:
    """A DataFrame as Parquet or CSV, by the path's suffix."""
    if Path(path).suffix == ".parquet":
        write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))
    else:
        write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False))


def foreign_entries(folder: Path, own: Iterable[str]) -> list[str]:
    """What `folder` holds that this tool did not write there (by name), so that --force never deletes it."""
    own = set(own)
    return sorted(p.name for p in Path(folder).iterdir() if p.name not in own and not p.name.startswith(TEMPORARY_PREFIX))


def remove_own_outputs(folder: Path, own: Iterable[str]) -> None:
    """--force on a results folder: delete the files and folders this tool writes there, and nothing else."""
    import shutil

    for name in own:
        path = Path(folder) / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
