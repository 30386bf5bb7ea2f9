"""``python -m labkit.diagnose FILE``: diagnose a rollout file, print a summary, write the reports.

FILE is a rollout file in labkit's record format (JSONL, Parquet), or what a training framework
wrote: TRL's completions Parquet (a file, or the output folder), verl's rollout dump (a
``<step>.jsonl``, or the folder), a saved verl DataProto (with ``--trust-pickle`` only). The
reports (``report.md`` with ``report_files/``, and a self-contained ``report.html``) go to
``--out``; by default to ``<FILE stem>_diagnosis/`` in the current directory (not next to the
file, which may sit in a read-only or shared folder). A mistake in the input or the arguments
prints one line saying what to do and exits with status 2 (``--debug``: the traceback).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from labkit.diagnose.diagnosis import DEFAULT_SAMPLE, STREAM_BATCH_ROWS, diagnose
from labkit.io import FORMATS

#: Exceptions that mean "the input or an argument is wrong": reported in one line, not a traceback.
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, IsADirectoryError, PermissionError, ImportError)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m labkit.diagnose", description=__doc__.split("\n\n")[0])
    p.add_argument("file", help="rollout file (labkit's JSONL or Parquet), TRL's completions (file or output folder), "
                                "verl's rollout dump (file or folder), or a saved verl DataProto")
    p.add_argument("--out", help="folder for report.md / report.html (default: ./<FILE stem>_diagnosis)")
    p.add_argument("--format", dest="fmt", choices=FORMATS,
                   help="the input's format (default: told from the file's name and first record)")
    p.add_argument("--tokenizer", help="tokenizer folder (saved with save_pretrained; read offline) to count tokens "
                                       "in text logged without token ids (default: count characters)")
    p.add_argument("--reward", help="comma-separated column(s) to use as the reward (default: the file's reward, "
                                    "else the sum of TRL's reward-function columns)")
    p.add_argument("--trust-pickle", action="store_true",
                   help="read a saved verl DataProto (a pickle: loading it runs code; only for your own files)")
    p.add_argument("--debug", action="store_true", help="show the traceback of an error")
    p.add_argument("--can-replay", action=argparse.BooleanOptionalAction, default=None,
                   help="training can (or, --no-can-replay, cannot) restart from intermediate states "
                        "(default: not stated; the tree then assumes not, and raises no caveat about it)")
    p.add_argument("--privileged-info", action=argparse.BooleanOptionalAction, default=None,
                   help="training has (or not) information the agent will not see (gold answers, hidden state); "
                        "default: not stated")
    p.add_argument("--max-length", type=int, help="the generation cap, in the data's positions (tokens; characters "
                                                  "for text read without --tokenizer), to measure truncation")
    p.add_argument("--stochastic", choices=["measure", "yes", "no"], default="measure",
                   help="environment stochasticity: measured from repeats (default) or stated")
    p.add_argument("--estimators", help="comma-separated estimator names (default: all the data supports; "
                                        "'none' skips the comparison)")
    p.add_argument("--sample", type=int, default=DEFAULT_SAMPLE,
                   help=f"trajectories for the estimator comparison (default {DEFAULT_SAMPLE}; 0 = all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch-rows", type=int, default=STREAM_BATCH_ROWS,
                   help=f"records read at once: the file is streamed, so memory follows this, not the file's "
                        f"size (default {STREAM_BATCH_ROWS})")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for a mistake in the input or the
    arguments, told in one line on stderr)."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except USER_ERRORS as err:
        if args.debug:
            raise
        print(f"error: {err} (--debug for the traceback)", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    estimators = None
    if args.estimators:
        estimators = [] if args.estimators == "none" else [n.strip() for n in args.estimators.split(",") if n.strip()]
    stochastic = {"measure": None, "yes": True, "no": False}[args.stochastic]
    d = diagnose(args.file, fmt=args.fmt, can_replay=args.can_replay, privileged_info=args.privileged_info,
                 stochastic_env=stochastic, estimators=estimators, sample=args.sample or None, seed=args.seed,
                 progress=False if args.no_progress else None, batch_rows=args.batch_rows,
                 tokenizer=args.tokenizer, trust_pickle=args.trust_pickle, max_length=args.max_length,
                 reward=[r.strip() for r in args.reward.split(",") if r.strip()] if args.reward else None)
    out = Path(args.out) if args.out else Path.cwd() / f"{Path(args.file).resolve().stem}_diagnosis"
    md, page = d.save(out)
    print(d.summary())
    print(f"reports: {md} and {page}" + ("" if args.out else " (default: current directory)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
