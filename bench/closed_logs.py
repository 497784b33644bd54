"""A pull event log waiting to be compacted, for benches that measure the server while its
background compaction runs (``bench/e2e.py --compaction-cost``, ``bench/hold.py --compacting``).

``seed(folder, files)`` copies ``files`` closed hourly files of generated events (about 100 MiB
and 260k events each: ``spark_jobs.generate``'s default profile, made once under
``bench/out/spark/`` as ``bench/spark.py`` makes them) into a server's log folder before it
starts, and syncs them to disk (a bench compares runs with and without compaction, both seeded
the same way: a backlog being written back would slow the server's own writes). Their hours ended long ago and their modification times are kept, so the server's pull
log starts ``rmqproxy compact`` on them at once (``pullLogCompact``), niced, as it would on its
own closed files.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from spark_jobs import generate  # noqa: E402

SOURCE = ROOT / "bench" / "out" / "spark" / "events-10000000-seed7"
#: All of them (10M events, ~4 GiB): minutes of niced compaction while the server is saturated,
#: where a dozen files were done before a bench's client had warmed up.
DEFAULT_FILES = 40


def source(events: int = 10_000_000) -> Path:
    """The generated hourly files (made now if missing, as ``bench/spark.py`` makes them)."""
    done = SOURCE / "_COMPLETE"
    if not done.exists():
        shutil.rmtree(SOURCE, ignore_errors=True)
        started = time.monotonic()
        generate.write(SOURCE, events, seed=7)
        done.write_text(json.dumps({"events": events, "seed": 7, "seconds": time.monotonic() - started}))
    return SOURCE


def prepare(workdir: Path, compacting: bool) -> tuple[dict[str, str], dict]:
    """A server's working directory with closed files waiting in its log folder: the broker.conf
    keys that turn its background compaction on (``compacting``) or off, and what was seeded."""
    return {"pullLogCompact": str(compacting).lower()}, seed(log_folder(workdir))


def log_folder(workdir: Path) -> Path:
    """The pull event log's folder of a server whose working directory is ``workdir``."""
    return workdir / "store" / "logs"


def seed(folder: Path, files: int = DEFAULT_FILES) -> dict:
    """Copy ``files`` closed event-log files into ``folder``; what was copied."""
    folder.mkdir(parents=True, exist_ok=True)
    chosen = sorted(source().glob("pulls-*.jsonl"))[:files]
    for path in chosen:
        shutil.copy2(path, folder / path.name)
    os.sync()  # the copy's gigabytes written back now, not while the bench measures
    return {"files": len(chosen), "bytes": sum(p.stat().st_size for p in chosen)}


def left(folder: Path) -> int:
    """Closed JSON-lines files not compacted yet (the seeded ones)."""
    return len(list(folder.glob(f"pulls-*-{generate.INSTANCE_FILE_PART}-*.jsonl")))
