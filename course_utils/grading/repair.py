"""Fair scores for the accidents students make: a hand-in is repaired into the lab's shape before
nbgrader sees it, and each repair adds a note to the row's reason.

Repaired: an older notebook format (4.0-4.4, saved by an older JupyterLab, or version 3), cells
that are not valid for their type (a cell turned into markdown and back), an answer or test
cell turned into another type, a copied cell (JupyterLab copies nbgrader's metadata with it,
and nbgrader then fails on the duplicate id), cells moved out of the lab's order, another
kernel's name, and cells after the last test cell (never graded, so not run: one that errors,
hangs or kills its kernel there costs nothing).
"""

from __future__ import annotations

import copy
import uuid

import nbformat

CODE_KEYS = {"id", "cell_type", "metadata", "source", "outputs", "execution_count"}
TEXT_KEYS = {"id", "cell_type", "metadata", "source", "attachments"}


def nbgrader_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
    return grade_id if isinstance(grade_id, str) else None


def repair(nb, lab) -> tuple[object, list[str]]:
    """``nb`` brought into the shape of ``lab`` (the student version), and what was repaired."""
    notes = upgrade_format(nb, int(lab.get("nbformat_minor", 5)))
    known = {nbgrader_id(c): c for c in lab.cells if nbgrader_id(c)}
    notes += normalize_cells(nb)
    notes += restore_cell_types(nb, known)
    notes += forget_unknown_ids(nb, known)
    notes += merge_copies(nb, known)
    notes += restore_order(nb, lab)
    notes += skip_after_last_test(nb, lab)
    notes += kernel_note(nb, lab)
    nbformat.validator.normalize(nb)
    return nb, notes


def upgrade_format(nb, lab_minor: int) -> list[str]:
    """Bring an nbformat 4.0-4.4 notebook to 4.5 (cell ids), saying so when the lab itself was
    handed out in a newer format than the hand-in's."""
    original = nb.metadata.pop("orig_nbformat", None)
    nb.metadata.pop("orig_nbformat_minor", None)
    minor = int(nb.get("nbformat_minor", 0) or 0)
    notes = [f"converted from notebook format {original}"] if original else []
    if minor < lab_minor and not original:
        notes.append(f"upgraded from notebook format 4.{minor} (an older JupyterLab?)")
    nb["nbformat_minor"] = max(minor, 5)
    return notes


def normalize_cell(cell) -> bool:
    """Make ``cell`` valid for its type: the keys JupyterLab leaves behind when it turns a cell
    into markdown and back (attachments on code, outputs on markdown) go, missing ones come.
    True when something had to change."""
    before = dict(cell)
    if not isinstance(cell.get("metadata"), dict):
        cell["metadata"] = nbformat.NotebookNode()
    if not isinstance(cell.get("source"), str):
        source = cell.get("source")
        cell["source"] = "".join(source) if isinstance(source, list) else ""
    if not isinstance(cell.get("id"), str) or not cell["id"]:
        cell["id"] = uuid.uuid4().hex[:8]
        before["id"] = cell["id"]  # a missing id is the format's age, not a broken cell
    if cell.get("cell_type") not in ("code", "markdown", "raw"):
        cell["cell_type"] = "raw"
    keys = CODE_KEYS if cell["cell_type"] == "code" else TEXT_KEYS
    for key in [k for k in cell if k not in keys]:
        del cell[key]
    if cell["cell_type"] == "code":
        if not isinstance(cell.get("outputs"), list):
            cell["outputs"] = []
        cell.setdefault("execution_count", None)
    return dict(cell) != before


def normalize_cells(nb) -> list[str]:
    """normalize_cell on every cell, naming the lab's cells that needed it."""
    fixed = [nbgrader_id(c) or f"cell {i}" for i, c in enumerate(nb.cells, 1) if normalize_cell(c)]
    return [
        f"repaired cells left invalid (a cell type changed and back?): {', '.join(fixed)}"
    ] * bool(fixed)


def restore_cell_types(nb, known: dict) -> list[str]:
    """An answer or locked cell whose type changed gets the lab's type back, keeping its text."""
    changed = []
    for cell in nb.cells:
        lab_cell = known.get(nbgrader_id(cell))
        if lab_cell is not None and cell.cell_type != lab_cell.cell_type:
            changed.append(f"{nbgrader_id(cell)} ({cell.cell_type} to {lab_cell.cell_type})")
            cell["cell_type"] = lab_cell.cell_type
            normalize_cell(cell)
    return [f"turned back into the lab's cell type: {', '.join(changed)}"] * bool(changed)


def forget_unknown_ids(nb, known: dict) -> list[str]:
    """nbgrader metadata naming a cell the lab does not have makes nbgrader fail; such a cell
    (pasted from another notebook) is graded as an ordinary cell."""
    unknown = []
    for cell in nb.cells:
        grade_id = nbgrader_id(cell)
        meta = cell.metadata.get("nbgrader")
        if (grade_id is None and meta is not None) or (grade_id and grade_id not in known):
            unknown.append(grade_id or "(no id)")
            del cell.metadata["nbgrader"]
    return [f"ran as ordinary cells (not in this lab): {', '.join(unknown)}"] * bool(unknown)


def merge_copies(nb, known: dict) -> list[str]:
    """Copied cells: every copy of an answer cell runs, in the student's order, where the answer
    belongs (copies still holding the lab's stub are dropped when another copy has work in it);
    copies of a locked cell (tests, instructions) are dropped, since it is restored anyway."""
    by_id: dict[str, list] = {}
    for cell in nb.cells:
        if nbgrader_id(cell):
            by_id.setdefault(nbgrader_id(cell), []).append(cell)
    notes, drop = [], set()
    for grade_id, cells in by_id.items():
        if len(cells) < 2:
            continue
        if known[grade_id].metadata.nbgrader.get("solution"):
            stub = known[grade_id].source
            worked = [c for c in cells if c.source != stub] or cells[:1]
            drop |= {id(c) for c in cells if c not in worked}
            for extra in worked[1:]:
                extra.metadata["course_copy_of"] = grade_id
                del extra.metadata["nbgrader"]
            notes.append(f"ran {len(worked)} of the {len(cells)} copies of {grade_id} in its place")
        else:
            drop |= {id(c) for c in cells[1:]}
            notes.append(f"removed {len(cells) - 1} copy of locked cell {grade_id}")
    nb.cells = [c for c in nb.cells if id(c) not in drop]
    return notes


def restore_order(nb, lab) -> list[str]:
    """Put the lab's cells back in the lab's order. Every other cell (the student's own, or the
    lab's plain ones) stays right after the cell it followed; copies of an answer go with it."""
    order = {nbgrader_id(c): i for i, c in enumerate(lab.cells) if nbgrader_id(c)}
    groups: dict[str | None, list] = {None: []}
    anchor = None
    for cell in nb.cells:
        grade_id = nbgrader_id(cell) or cell.metadata.get("course_copy_of")
        if grade_id in order and nbgrader_id(cell):
            anchor = grade_id
            groups[anchor] = [cell]
        elif grade_id in order:  # a copy of an answer: right after the answer it copies
            groups.setdefault(grade_id, []).append(cell)
        else:
            groups.setdefault(anchor, []).append(cell)
    seen = [nbgrader_id(c) for c in nb.cells if nbgrader_id(c)]
    ranked = sorted(seen, key=order.__getitem__)
    cells = groups[None] + [c for g in ranked for c in groups.get(g, [])]
    for cell in cells:
        cell.metadata.pop("course_copy_of", None)
    nb.cells = cells
    kept = set(_longest_increasing(seen, order))
    moved = [g for g in seen if g not in kept]
    return [f"put back in the lab's order: {', '.join(moved)}"] * bool(moved)


def skip_after_last_test(nb, lab) -> list[str]:
    """Code cells after the last test cell are not run (markdown stays): no score depends on
    them. The note names only cells that are not the lab's own."""
    tests = {nbgrader_id(c) for c in lab.cells if _is_test(c)}
    last = max((i for i, c in enumerate(nb.cells) if nbgrader_id(c) in tests), default=None)
    if last is None:
        return []
    lab_sources = {c.source for c in lab.cells if c.cell_type == "code"}
    tail = nb.cells[last + 1 :]
    skipped = [c for c in tail if c.cell_type == "code"]
    nb.cells = nb.cells[: last + 1] + [c for c in tail if c.cell_type != "code"]
    own = [c for c in skipped if c.source.strip() and c.source not in lab_sources]
    if not own:
        return []
    return [f"did not run {len(own)} cell(s) of yours after the last exercise (never graded)"]


def _is_test(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution") and cell.cell_type == "code"


def kernel_note(nb, lab) -> list[str]:
    """The hand-in runs with the lab's kernel whatever its notebook names; say so if it differs."""
    theirs = nb.metadata.get("kernelspec", {})
    ours = lab.metadata.get("kernelspec", {})
    name = theirs.get("name") if isinstance(theirs, dict) else None
    if name and name != ours.get("name"):
        nb.metadata["kernelspec"] = copy.deepcopy(ours)
        return [f"ran with the lab's kernel ({ours.get('name')}), not {name}"]
    return []


def _longest_increasing(ids: list[str], order: dict[str, int]) -> list[str]:
    """The longest run of ``ids`` (not necessarily adjacent) already in the lab's order: the
    cells that did not move."""
    best: list[list[str]] = []
    for i, grade_id in enumerate(ids):
        before = [best[j] for j in range(i) if order[ids[j]] < order[grade_id]]
        best.append(max(before, key=len, default=[]) + [grade_id])
    return max(best, key=len, default=[])
