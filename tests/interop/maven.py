"""Build a small Maven project once per RocketMQ version and hand back its runtime classpath.

Shared by the scenario program (``scenarios/``) and the reference broker (``scenarios/reference-broker/``).
A project keeps one output tree per version (``<project>/target/<version>/``, set by the pom's
``<directory>``), so client lines coexist.  The command is::

    mvn -B -q -f <project>/pom.xml -Drocketmq.version=V compile dependency:build-classpath \\
        -Dmdep.includeScope=runtime -Dmdep.outputFile=<project>/target/V/classpath.txt

A hash of the pom, the sources and resources (and the version) is stamped into ``target/V/build.stamp``;
while it matches and every classpath entry still exists, Maven is not run again.  Builds of one
project and version take an exclusive file lock, so concurrent pytest sessions build one at a time.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["MavenBuildError", "build_classpath", "missing_tools"]


class MavenBuildError(RuntimeError):
    """Maven failed, or succeeded without leaving the expected outputs."""


def missing_tools() -> list[str]:
    """Names of the external tools (mvn, java) not found on PATH."""
    return [tool for tool in ("mvn", "java") if shutil.which(tool) is None]


def _stamp(project: Path, version: str, shared: tuple[Path, ...] = ()) -> str:
    h = hashlib.sha256(version.encode())
    files = [project / "pom.xml"]
    src = project / "src"
    if src.is_dir():
        files += sorted(p for p in src.rglob("*") if p.is_file())
    for f in [*files, *shared]:
        h.update(str(f.relative_to(project.parent)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _read_classpath(target: Path, marker: str | None) -> str | None:
    cp_file = target / "classpath.txt"
    if not cp_file.is_file():
        return None
    entries = [e for e in cp_file.read_text().strip().split(os.pathsep) if e]
    if not all(Path(e).exists() for e in entries):
        return None
    if marker is None:
        return os.pathsep.join(entries)
    classes = target / "classes"
    if not (classes / marker).is_file():
        return None
    return os.pathsep.join([str(classes), *entries])


def build_classpath(project: Path, version: str, *, marker: str | None = None, shared: tuple[Path, ...] = ()) -> str:
    """Build ``project`` for RocketMQ ``version`` and return its runtime classpath.

    ``marker`` is a class file path under ``target/<version>/classes`` (e.g.
    ``"rmqproxy/scenarios/Main.class"``) that must exist after the build; the classes directory
    then leads the classpath.  Without a marker the project has no sources of its own and the
    classpath is its dependencies only. ``shared`` names source files of another project the
    pom compiles too: they count in the stamp.
    """
    project = project.resolve()
    target = project / "target" / version
    target.mkdir(parents=True, exist_ok=True)
    stamp_file = target / "build.stamp"
    stamp = _stamp(project, version, tuple(p.resolve() for p in shared))
    with open(project / "target" / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp_file.is_file() and stamp_file.read_text() == stamp:
            cp = _read_classpath(target, marker)
            if cp is not None:
                return cp
        stamp_file.unlink(missing_ok=True)
        cmd = [
            "mvn", "-B", "-q", "-Dstyle.color=never",
            "-f", str(project / "pom.xml"),
            f"-Drocketmq.version={version}",
            "compile", "dependency:build-classpath",
            "-Dmdep.includeScope=runtime",
            f"-Dmdep.outputFile={target / 'classpath.txt'}",
        ]
        proc = subprocess.run(cmd, check=False, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise MavenBuildError(f"{' '.join(cmd)} failed with exit code {proc.returncode}:\n{proc.stdout[-4000:]}")
        cp = _read_classpath(target, marker)
        if cp is None:
            raise MavenBuildError(f"maven succeeded but {target} lacks classpath.txt or {marker}")
        stamp_file.write_text(stamp)
        return cp
