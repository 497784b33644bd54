"""``python -m dashboards``: regenerate dashboards/json/*.json and dashboards/alerts.yml.

``--check`` writes nothing and exits 1 when a committed file differs from the generator's output.
``--out DIR`` writes them elsewhere.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .generate import ROOT, render, stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if a file is stale")
    parser.add_argument("--out", type=Path, default=ROOT, help="directory to write into (default: the package)")
    args = parser.parse_args(argv)
    files = render(args.out)
    if args.check:
        behind = stale(files)
        for path in behind:
            print(f"stale: {path} (run python -m dashboards)", file=sys.stderr)
        return 1 if behind else 0
    for path in write(files):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
