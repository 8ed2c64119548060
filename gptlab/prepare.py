"""`python -m gptlab.prepare NAME`: build a named corpus from its published data (`gptlab.run.corpora`).

The file goes where a run looks for it: `$GPTLAB_DATA_DIR/NAME/input.txt` when that variable is set,
else the user cache (`~/.cache/gptlab/NAME/input.txt`), or `--out`. It is written only once its sha256
matches the registry's, so a run never trains on a text that differs from everyone else's.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from gptlab.errors import GptlabError, exit_status, hidden_package
from gptlab.run.cache import cache_dir
from gptlab.run.corpora import DATASETS

log = logging.getLogger("gptlab.prepare")


def default_destination(name: str) -> Path:
    """Where `resolve_dataset` looks first for `name`: under $GPTLAB_DATA_DIR if set, else the cache."""
    filename = DATASETS.get(name).filename
    root = os.environ.get("GPTLAB_DATA_DIR")
    return (Path(root) if root else cache_dir()) / name / filename


def main(argv: list[str] | None = None) -> int:
    if (hidden := hidden_package()) is not None:  # a bare folder named gptlab shadows the package: nothing would work
        return exit_status(hidden)
    from gptlab.run.corpora import prepare_dataset

    prepared = [n for n in DATASETS.names() if DATASETS.get(n).prepare is not None]
    parser = argparse.ArgumentParser(prog="python -m gptlab.prepare", description=__doc__.splitlines()[0])
    parser.add_argument("name", help=f"the corpus to build: {', '.join(prepared)}")
    parser.add_argument("--out", type=Path, help="write the file here instead of where runs look for it")
    parser.add_argument("--from", dest="published", metavar="URL_OR_DIR",
                        help="the published data's address (default: the entry's own, e.g. the package's release)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.name not in DATASETS:
            DATASETS.get(args.name)  # raises, naming the valid ones
        dest = args.out or default_destination(args.name)
        source = DATASETS.get(args.name)
        if dest.is_dir():
            raise GptlabError(f"--out: {dest} is a directory; give the file to write")
        if dest.exists() and not dest.is_file():  # a device or a FIFO: a rename onto it would replace it
            raise GptlabError(f"--out: {dest} is not a regular file; give a file path to write")
        if source.prepare is not None:
            print(f"preparing {args.name} from {args.published or source.published} ...", file=sys.stderr)
        path = prepare_dataset(args.name, dest, args.published)
    except GptlabError as err:
        return exit_status(err)
    print(f"wrote {path} ({path.stat().st_size:,} bytes, sha256 {source.sha256[:12]}... verified)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
