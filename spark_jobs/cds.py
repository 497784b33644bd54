"""Class data sharing for the driver JVM that a job launches itself (``python -m``, not spark-submit).

A Spark driver loads and verifies thousands of classes from jars before its first query. Java's
dynamic CDS archive maps the classes an earlier run loaded instead: ~2.5 s off session start and
~1 s off the first query on the bench machine (bench/spark.py), the same for every run after the
first. The first run records the archive; it starts slower and writes the archive (~150 MB) when
its JVM exits, and only then is the archive put in place, so a run never maps a partial file.

Archives live in ``$SPARK_JOBS_CDS_DIR`` (default ``~/.cache/rmqproxy/cds``), one per Java binary
and Spark jar set (a JVM ignores an archive made by another JDK or for other jars anyway).
``SPARK_JOBS_CDS=off`` turns this off; so does an unwritable directory. One process records at a
time (a lock file); the others run without an archive meanwhile.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

#: JVM logging of CDS off: recording warns about every class it cannot archive, and a JVM given an
#: archive it cannot use (another JDK) says so; neither changes what the job does.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: The JVM checks the archive's checksums and runs without it on a mismatch (a damaged file).
USE = "-XX:SharedArchiveFile={archive} -XX:+VerifySharedSpaces " + QUIET
#: The recording's own log: it ends with this line only when the whole archive was written.
RECORD = "-XX:ArchiveClassesAtExit={archive} " + QUIET + " -Xlog:cds+dynamic=info:file={log}"
WRITTEN = "Written dynamic archive"
OFF = ("off", "0", "false", "no")
#: A lock older than this is a recording run that died before its JVM wrote the archive.
STALE_LOCK_S = 900


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and os.path.exists(found) else None


def _key() -> str | None:
    """What an archive is valid for: the Java binary and Spark's jars, names and sizes."""
    from pyspark.find_spark_home import _find_spark_home

    java = _java()
    jars = Path(_find_spark_home()) / "jars"
    if java is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}\0{stat.st_size}\0{stat.st_mtime_ns}\0{jars.resolve()}\0".encode())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(f"{jar.name}\0{jar.stat().st_size}\0".encode())
    return digest.hexdigest()[:20]


def _directory() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rmqproxy" / "cds"
    return Path(os.environ.get("SPARK_JOBS_CDS_DIR") or default)


class Archive:
    """The driver JVM flags for this machine's archive, and the step that keeps a new recording."""

    def __init__(
        self, flags: str = "", recording: Path | None = None, final: Path | None = None, lock: Path | None = None
    ) -> None:
        self.flags = flags
        self._recording, self._final, self._lock = recording, final, lock

    def started(self, proc: subprocess.Popen | None) -> None:
        """Call once the JVM started with these flags is up: a recording is kept when this Python
        process exits (its JVM exits then and writes the archive), or dropped without a JVM."""
        if self._recording is None:
            return
        if proc is None:
            self._release()
            return
        atexit.register(self._keep, proc)

    def discard(self) -> None:
        """Delete the archive these flags map (a JVM could not start with it) and any recording."""
        if self._final is not None and self._recording is None:
            with contextlib.suppress(OSError):
                self._final.unlink()
        self._release()

    def _keep(self, proc: subprocess.Popen) -> None:
        """Stop the JVM, and put its archive in place only if it wrote all of it (a truncated
        archive makes the next JVM fail to start)."""
        try:
            if proc.poll() is None and proc.stdin is not None:
                proc.stdin.close()  # the gateway JVM exits when its stdin closes
            if proc.wait(timeout=300) == 0 and WRITTEN in _log(self._recording).read_text(errors="replace"):
                os.replace(self._recording, self._final)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            self._release()

    def _release(self) -> None:
        paths = (self._recording, _log(self._recording), self._lock) if self._recording else ()
        for path in paths:
            with contextlib.suppress(OSError):
                path.unlink()


def _log(recording: Path) -> Path:
    return recording.with_suffix(".log")


def _archive_path() -> Path | None:
    """Where this machine's archive is or goes (``None``: off, or no Java or Spark jars found)."""
    if os.environ.get("SPARK_JOBS_CDS", "").lower() in OFF or (key := _key()) is None:
        return None
    return _directory() / f"spark-{key}.jsa"


def existing() -> Path | None:
    """This machine's archive, if recorded (and not turned off)."""
    final = _archive_path()
    return final if final is not None and final.is_file() else None


def archive() -> Archive:
    """Flags that map this machine's archive, or record one if there is none and nobody else is."""
    final = _archive_path()
    if final is None:
        return Archive()
    if final.is_file():
        return Archive(USE.format(archive=final), final=final)
    directory = final.parent
    lock = final.with_suffix(".lock")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
                lock.unlink()
        lock.touch(exist_ok=False)
    except OSError:  # recorded by another process right now, or no writable cache directory
        return Archive()
    recording = final.with_suffix(f".{os.getpid()}.recording")
    return Archive(RECORD.format(archive=recording, log=_log(recording)), recording, final, lock)
