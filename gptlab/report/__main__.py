"""CLI: `python -m gptlab.report results/NAME [--out DIR] [--margin NATS] [-v]` regenerates reports/NAME/.

Invalid input (missing directory, no summary.csv, ...) prints one line to stderr and exits 2;
an I/O error while writing prints one line and exits 1.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from gptlab.errors import exit_status, hidden_package

    if (hidden := hidden_package()) is not None:  # a bare folder named gptlab shadows the package: nothing would work
        return exit_status(hidden)
    parser = argparse.ArgumentParser(prog="python -m gptlab.report",
                                     description="Regenerate reports/NAME/ from results/NAME/ alone.")
    parser.add_argument("results_dir", type=Path, help="a sweep's results directory, e.g. results/quick")
    parser.add_argument("--out", type=Path, default=None,
                        help="report directory (default: reports/NAME next to the results/ folder)")
    parser.add_argument("--margin", metavar="NATS",
                        help="equivalence margin for 'equivalent' calls, nats/char (overrides the sweep's "
                        "report.equivalence_margin; default: that, else 0.01)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    from gptlab.errors import GptlabError
    from gptlab.report import write_report
    try:
        out = write_report(args.results_dir, args.out, margin=args.margin)  # the load step checks the margin
    except (GptlabError, OSError) as exc:  # an OSError: e.g. an unwritable report directory
        return exit_status(exc)
    print(out / "report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
