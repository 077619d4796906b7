"""A run's logs next to its checkpoint: ``log.csv`` (a row per update) and ``log.json``."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .io import atomic_write_text


def log_rows(history) -> list[list]:
    """The CSV rows of a history: step, lr, loss, grad_norm, then one column per metric
    (filled at the steps where an evaluation ran)."""
    evals = {e["step"]: e for e in history.evals}
    metrics = sorted({k for e in history.evals for k in e} - {"step", "seconds"})
    rows = [["step", "lr", "loss", "grad_norm", *metrics]]
    for i, (lr, loss, norm) in enumerate(zip(history.lrs, history.losses, history.grad_norms)):
        e = evals.get(i + 1, {})
        rows.append([i + 1, f"{lr:.6g}", repr(loss), repr(norm), *(e.get(m, "") for m in metrics)])
    return rows


def write_logs(out_dir: str | Path, history) -> None:
    """Write ``log.csv`` and ``log.json`` (the whole history) into ``out_dir``, atomically."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(log_rows(history))
    atomic_write_text(Path(out_dir) / "log.csv", buf.getvalue())
    atomic_write_text(Path(out_dir) / "log.json", json.dumps(history.to_dict()))
