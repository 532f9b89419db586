"""Writing files so that a reader never sees half of one: write beside the target, then rename."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call write(temporary path) in the target's folder, then rename it over `path`; no temporary file is left."""
    path = Path(path)
    # Unique per process and thread, so that two writers never share (or delete) a temporary file.
    tmp = path.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{path.name}")
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
