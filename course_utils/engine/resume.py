"""Resuming a run: the checkpoint must belong to the same run, or the resume is refused.

A checkpoint records the run it belongs to: the :data:`~.config.RUN_FIELDS` of its
:class:`~.config.TrainConfig` (with the schedule's planned length), the model's config and the
project's ``meta``. :func:`resume_state` compares them with the run asking to resume and refuses
the first difference in one line naming the field, both values and the fix. ``extend`` is the
one way to change ``steps``: the run goes on past its planned end at the schedule's final
learning rate (the cosine already reached its floor), the saved schedule (its length and
warmup) kept.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from . import checkpoint as ckpt
from .config import RUN_FIELDS

EXTEND_HELP = (
    "with --resume: train past the run's planned steps up to --steps; the run keeps its "
    "schedule, the extra steps at its final learning rate (the cosine's floor)"
)
EXTENDABLE = ("steps", "warmup_steps")  # what extend may change: the schedule stays the saved one


def run_record(config, schedule, resolved: dict | None = None) -> dict:
    """What a checkpoint records of its training config: the fields that change the run, the
    schedule it follows (``config``'s own unless the run was extended) and what the run
    ``resolved`` of its choices (precision ``auto``); a resume keeps the last two."""
    record = {name: getattr(config, name) for name in RUN_FIELDS}
    planned = {name: getattr(schedule, name) for name in EXTENDABLE}
    return _plain({**record, "schedule": planned, "resolved": resolved or {}})


def _plain(value):
    """``value`` as JSON has it (tuples become lists), so saved and new values compare."""
    return json.loads(json.dumps(value))


def _flat(d: dict, prefix: str) -> dict:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def first_difference(saved: dict, now: dict, *, extend: bool) -> tuple[str, object, object] | None:
    """The first field (dotted, e.g. ``train.steps``) whose value differs between two run
    descriptions, with the saved and the new value; ``extend`` lets ``steps`` grow (and the
    warmup differ: an extended run keeps its saved schedule). Not compared: a field whose name
    starts with ``_`` (a note, such as where a corpus was) and a ``meta`` field the checkpoint
    lacks (written before the project recorded it)."""
    old, new = _flat(_plain(saved), ""), _flat(_plain(now), "")
    for key in [*old, *(k for k in new if k not in old)]:
        if key.startswith(("train.schedule.", "train.resolved.")):  # kept, not compared
            continue
        name = key.split(".")[-1]
        if name.startswith("_") or (key.startswith("meta.") and key not in old):
            continue  # a note for people, or what the checkpoint did not record yet
        a, b = old.get(key), new.get(key)
        grows = name != "steps" or (isinstance(a, int) and isinstance(b, int) and b > a)
        if a != b and not (extend and name in EXTENDABLE and grows):
            return key, a, b
    return None


def refusal(path: Path, field: str, old, new) -> str:
    """The one-line message of a refused resume."""
    name = field.split(".")[-1]
    fix = f"resume with {name}={old!r} as the run began, or train into a new output folder"
    if name == "steps":
        fix += (
            f"; to train past the planned {old} steps pass extend=True (--extend): the run "
            f"keeps its schedule, the extra steps at its final learning rate"
        )
    return f"cannot resume {path}: {field} was {old!r}, now {new!r}; {fix}"


def check_run_dir(out_dir) -> None:
    """Refuse, before any work, a run folder that cannot be one: a file, or a path inside one."""
    out = Path(out_dir)
    above = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if above == out:
        raise ckpt.CheckpointError(
            f"the run folder {out} is a file, not a folder; pass a folder (--out DIR): a new "
            f"one, or the folder of the run to resume"
        )
    if above is not None:
        raise ckpt.CheckpointError(
            f"the run folder {out} would be inside {above}, which is a file; pass a folder "
            f"path (--out DIR) outside it"
        )


def resume_state(out_dir, *, resume: bool, extend: bool, now: dict, project, main: bool):
    """The checkpoint to resume from (None for a fresh run), after checking it is this run:
    ``now`` holds ``train`` (:func:`run_record`), ``model`` (a model config dict) and ``meta``."""
    if out_dir is not None:
        check_run_dir(out_dir)
    path = Path(out_dir) / ckpt.CHECKPOINT_NAME if out_dir is not None else None
    if not resume:
        if extend:
            raise ckpt.CheckpointError("extend=True (--extend) continues a run: pass resume too")
        if path is not None and path.exists() and main:
            raise ckpt.CheckpointError(
                f"{path} exists; pass resume=True (--resume) to continue that run, or choose "
                f"another output folder"
            )
        return None
    if path is None:
        raise ckpt.CheckpointError(
            "resuming needs the run's folder (--out DIR) with its checkpoint"
        )
    state = ckpt.read_checkpoint(path, project=project)
    if state.get("run") is None:
        raise ckpt.CheckpointError(
            f"{path} was written before checkpoints recorded their training config (format "
            f"version {state.get('version')}): it loads for eval and sampling, but a resume "
            f"could not check it is the same run; start a new run in another folder"
        )
    saved = {"train": state["run"], "model": state.get("model_config"), "meta": state["meta"]}
    diff = first_difference(saved, now, extend=extend)
    if diff is not None:
        raise ckpt.CheckpointError(refusal(path, *diff))
    return state


def model_config_dict(model) -> dict | None:
    config = getattr(model, "config", None)
    return dataclasses.asdict(config) if dataclasses.is_dataclass(config) else None
