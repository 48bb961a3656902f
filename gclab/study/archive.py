"""Run archives: a finished run's results in one small file, so a study outlives its machine.

A study folder holds hours of training in run directories that are too large to keep
(checkpoints, logs). The archive keeps, per finished real run, only the files that the
report and the replays read: ``.hydra/{config,hydra,overrides}.yaml``, ``summary.json`` and
``metrics.jsonl``, as ``<archive>/<unit name>.tar.xz`` (about 0.1 MB for a 3-epoch run).
Committing the archive folder lets another machine continue the study where this one
stopped: ``python -m gclab.study --archive DIR`` restores every archived run that its
study folder lacks (so it is not trained again), and archives every run that finishes.

The archives are reproducible: same files, same bytes (no timestamps or owners inside).
"""

from __future__ import annotations

import io
import lzma
import shutil
import tarfile
from pathlib import Path

from gclab.errors import ConfigError
from gclab.tracking.artifacts import atomic_write

#: What an archive keeps of a run directory; the first three are required.
REQUIRED = ("summary.json", "metrics.jsonl", ".hydra/config.yaml")
OPTIONAL = (".hydra/hydra.yaml", ".hydra/overrides.yaml")
SUFFIX = ".tar.xz"


def archive_path(archive: Path, unit: str) -> Path:
    """Where the run of ``unit`` (``<variant>/<loss>/seed<k>``) is archived."""
    return archive / (unit + SUFFIX)


def archive_run(run_dir: Path, dest: Path) -> Path:
    """Write the result files of the finished run ``run_dir`` into ``dest`` (atomically)."""
    missing = [name for name in REQUIRED if not (run_dir / name).is_file()]
    if missing:
        raise ValueError(f"{run_dir} is not a finished run: it has no {', '.join(missing)}")
    names = [*REQUIRED, *(name for name in OPTIONAL if (run_dir / name).is_file())]

    def write(tmp: Path) -> None:
        with tarfile.open(tmp, "w:xz", format=tarfile.PAX_FORMAT) as tar:
            for name in names:
                data = (run_dir / name).read_bytes()
                info = tarfile.TarInfo(name)  # mtime 0, owner root: the same bytes every time
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))

    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dest, write)
    return dest


def _unpack(source: Path, staging: Path) -> None:
    """The archive's known files into ``staging``; ConfigError if the archive is damaged."""
    try:
        with tarfile.open(source, "r:xz") as tar:
            present = set(tar.getnames())
            missing = [name for name in REQUIRED if name not in present]
            if missing:
                raise ConfigError(
                    f"archive {source} lacks {', '.join(missing)}; archive the run again."
                )
            for name in (*REQUIRED, *OPTIONAL):
                member = tar.extractfile(name) if name in present else None
                if member is not None:
                    (staging / name).parent.mkdir(parents=True, exist_ok=True)
                    (staging / name).write_bytes(member.read())
    except (tarfile.TarError, lzma.LZMAError, EOFError) as exc:
        raise ConfigError(f"archive {source} cannot be read ({exc}); restore it from git.") from exc


def restore_run(source: Path, run_dir: Path) -> None:
    """Unpack the archived run ``source`` into ``run_dir``, replacing an unfinished run there.

    Only the archive's known files are read (by name), so an archive cannot write outside
    ``run_dir``; a damaged one raises :class:`ConfigError` and leaves ``run_dir`` as it was.
    """
    staging = run_dir.with_name(f".{run_dir.name}.restoring")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _unpack(source, staging)
    except ConfigError:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if run_dir.exists():
        shutil.rmtree(run_dir)  # an unfinished run of the same unit: the archive supersedes it
    staging.rename(run_dir)
