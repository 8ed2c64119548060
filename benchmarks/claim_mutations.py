"""Mutation test of the check that README, findings and discussion numbers are the table cells they quote.

Every typed number of every reference study's discussion (results/NAME/discussion.md), of its
paragraph of docs/FINDINGS.md and of its row of the README's findings table is mutated one at a
time: its sign flipped (not a half-width typed as +/-x, nor a zero) and shifted by one unit in its last digit, up and
down. A mutant is caught when
`tests/test_reference_studies.py::check_quotes` reports a problem that the unmutated text does not;
a number the check cannot trace in the unmutated text (a "problem", which fails the test) is not mutated.
Numbers inside `{{table: row}}` references are rendered from the tables and are not typed, so not
mutated. Prints one line per document and the totals; `--show` lists the mutants that got through.

    python benchmarks/claim_mutations.py [--show] [--regenerate]

By default the committed reports/NAME (tables and report.md) are the source of truth; `--regenerate`
first writes every report afresh from results/NAME into a temporary folder (as the test does).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from test_reference_studies import DECLARED, STUDIES, Study, blank_references, check_quotes, documents, mutants, quoted_numbers  # noqa: E402

KINDS = ("sign", "up", "down")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="list the mutants the check did not catch")
    parser.add_argument("--regenerate", action="store_true", help="regenerate the reports first (about a minute)")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.regenerate:
        from gptlab.report import write_report
        root = Path(tempfile.mkdtemp(prefix="claims-"))
        studies = {name: Study.load(write_report(REPO / "results" / name, root / name)) for name in STUDIES}
    else:
        studies = {name: Study.load(REPO / "reports" / name) for name in STUDIES}
    totals = {k: [0, 0] for k in KINDS}
    missed: list[str] = []
    print(f"{'document':<28} {'numbers':>7} {'problems':>8}  " + "  ".join(f"{k + ' caught':>14}" for k in KINDS))
    for (name, kind), text in sorted(documents().items()):
        study, declared = studies[name], DECLARED.get((name, kind), {})
        problems = check_quotes(text, study, declared)
        numbers = quoted_numbers(blank_references(text))
        row = {k: [0, 0] for k in KINDS}
        for q, what, mutant, caught in mutants(text, study, declared):
            row[what][0] += caught
            row[what][1] += 1
            if not caught:
                context = text[max(0, q.start - 40):q.start].replace("\n", " ")
                missed.append(f"{name}/{kind}: {q.text} -> {mutant} after '...{context}'")
        for k in KINDS:
            totals[k][0] += row[k][0]
            totals[k][1] += row[k][1]
        print(f"{name + ' ' + kind:<28} {len(numbers):>7} {len(problems):>8}  "
              + "  ".join(f"{row[k][0]:>6} of {row[k][1]:<4}" for k in KINDS))
    print(f"{'total':<28} {'':>7} {'':>8}  " + "  ".join(f"{totals[k][0]:>6} of {totals[k][1]:<4}" for k in KINDS))
    for k in KINDS:
        made = totals[k][1]
        print(f"{k}: {totals[k][0]} of {made} caught ({100 * totals[k][0] / max(made, 1):.1f}%)")
    print(f"({time.perf_counter() - start:.1f} s)")
    if args.show:
        print("\n".join(["not caught:"] + missed) if missed else "every mutant caught")


if __name__ == "__main__":
    main()
