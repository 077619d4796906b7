"""A notebook cell read as Python, the one way the grader does it."""

from __future__ import annotations

import ast


def parse_cell(source: str) -> ast.Module | None:
    """The cell as the kernel runs it: IPython's own transforms turn magics (the hosted
    install's ``%pip``) into Python first, so a magic hides none of the cell's code; None for a
    cell that is not Python even then (a half-typed line)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return ast.parse(TransformerManager().transform_cell(source))
    except SyntaxError:
        return None
