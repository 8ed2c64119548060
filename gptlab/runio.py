"""Atomic file writes (the only ones in gptlab) and plain json/yaml/csv reading and writing.

Every file is written to a temp file in the same directory, fsynced and renamed over the target,
so an interrupted writer leaves either the old file or the new one, never half of one.
"""
from __future__ import annotations

import csv
import errno
import glob
import io
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable

import yaml

from gptlab.errors import GptlabError, first_line


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates files 0600; renamed files get the mode a plain open() would have given.
FILE_MODE = 0o666 & ~_current_umask()


TEMP_SUFFIX = ".tmp"  # atomic_write's temp file beside PATH is .NAME.XXXXXXXX.tmp
DISK_FULL_BYTES = 2**20  # a write that fails with less free than this on its disk failed for want of space


class DiskFull(GptlabError):
    """A write that failed because its disk (or quota) is full; the message names the file and the free space."""


def _disk_full(path: Path, error: BaseException) -> DiskFull | None:
    """`error` as a `DiskFull` when the disk is full: ENOSPC or EDQUOT, or any failure (torch.save's
    "[enforce fail at inline_container.cc]" names no errno) with under DISK_FULL_BYTES left."""
    full = isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    if not full and (free is None or free >= DISK_FULL_BYTES):
        return None
    left = f"{free / 2**20:.1f} MiB free" if free is not None else "free space unknown"
    return DiskFull(f"disk full: cannot write {path} ({left} on its disk, {type(error).__name__}: "
                    f"{first_line(error)}); free some space, then resume")


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """The one atomic write: `write(f)` fills a temp file beside `path`, which is fsynced, then renamed.

    If `write` raises, the temp file is removed and `path` keeps its old content (or stays absent);
    a failure for want of space is re-raised as `DiskFull`, a message that says so.
    The fsync before the rename makes a power cut leave the old file or the new one, never an
    empty one (ext4 and XFS may otherwise commit the rename before the data). Permissions are
    those a plain open() would give.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException as error:
        full = _disk_full(path, error) if isinstance(error, Exception) else None  # measured before the temp goes
        if os.path.exists(tmp):
            os.unlink(tmp)
        if full is not None:
            raise full from error
        raise
    _fsync_dir(path.parent)


def remove_temp_files(folder: str | os.PathLike, names: Iterable[str]) -> int:
    """Delete the temp files a killed writer of `names` left in `folder` (a process ended mid-write
    by SIGKILL or `os._exit` cannot remove its own); return how many. Call it only while holding
    what keeps other writers of those files away (a run's lock): it would delete their temp files too.
    """
    removed = 0
    for name in names:
        for tmp in Path(folder).glob(f".{glob.escape(name)}.*{TEMP_SUFFIX}"):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


def _fsync_dir(folder: Path) -> None:
    """Persist a rename (best effort: not every OS or file system lets a directory be fsynced)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` atomically (see `atomic_write`)."""
    atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def write_yaml(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False, default_flow_style=False))


# What `yaml.safe_load` does, through libyaml's parser where PyYAML was built with it (the same safe constructor,
# 7x faster: a report reads every run's config.yaml).
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str | bytes) -> Any:
    """`yaml.safe_load(text)`, faster: standard YAML tags only."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)


def read_yaml(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return parse_yaml(f.read())


def _clean(value: Any) -> Any:
    """JSON has no NaN: non-finite floats become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json(path: str | os.PathLike, data: Any) -> None:
    atomic_write_text(path, json.dumps(_clean(data), indent=2) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_mapping(path: str | os.PathLike) -> dict[str, Any] | None:
    """A JSON object from `path`, or None when it is missing, unreadable or not an object."""
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_csv_rows(path: str | os.PathLike) -> list[dict[str, str]]:
    """A CSV file's rows as text, by its header (a missing file: none)."""
    if not Path(path).is_file():
        return []
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def read_number_rows(path: str | os.PathLike, columns: list[str]) -> tuple[dict[str, float], ...] | None:
    """A CSV file's `columns` as numbers (a value that is missing or not a number: NaN), None when it cannot be read."""
    def number(text: Any) -> float:
        try:
            return float(text)
        except (TypeError, ValueError):
            return math.nan

    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return tuple({c: number(row.get(c)) for c in columns} for row in csv.DictReader(fh))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None


def csv_text(rows: Iterable[dict[str, Any]], columns: list[str]) -> str:
    """Rows as the text of a CSV file (a header, then one line per row; None as an empty field)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    return buffer.getvalue()


def write_csv(path: str | os.PathLike, rows: Iterable[dict[str, Any]], columns: list[str]) -> None:
    atomic_write_text(path, csv_text(rows, columns))
