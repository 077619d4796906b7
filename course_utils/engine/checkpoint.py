"""The one checkpoint format: a versioned dict, written atomically, read back with clear errors.

A checkpoint holds what a resume needs (weights, optimizer moments, step, RNG state, history)
and what a later reader needs (the model's :class:`GPTConfig`, and a project's ``meta``: its
run configuration, vocabulary, ...). :func:`read_checkpoint` turns every way a file can be
wrong into one :class:`CheckpointError` that names the file and the fix; it also reads the two
formats SumGPT and BookGPT wrote before this one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
from torch import nn

from ..core.model import GPT, GPTConfig
from .io import atomic_write

FORMAT = "course_utils-checkpoint"
VERSION = 2  # 2: the run's training config ("run") and every DDP rank's RNG state ("rank_rng")
READABLE = (1, 2)  # version 1 loads for eval and sampling; a resume needs the "run" record
CHECKPOINT_NAME = "ckpt.pt"  # the file's name inside a run folder


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file, the problem and the fix."""


def rng_state() -> dict:
    """The torch RNG states (CPU and every CUDA device) that dropout draws from."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []
    return {"torch": torch.get_rng_state(), "cuda": cuda}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    path,
    model: nn.Module,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    step: int = 0,
    history: dict | None = None,
    meta: dict | None = None,
    run: dict | None = None,
    rank_rng: list | None = None,
) -> Path:
    """Write ``model`` (its weights, on the CPU, and its config when it has one) with the
    optimizer state, ``step``, ``history``, the RNG state, ``meta`` and the ``run`` record
    (:func:`course_utils.engine.resume.run_record`), atomically."""
    config = getattr(model, "config", None)
    state = {
        "format": FORMAT,
        "version": VERSION,
        "model_config": dataclasses.asdict(config) if dataclasses.is_dataclass(config) else None,
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "step": int(step),
        "history": history or {},
        "rng": rng_state(),
        "meta": dict(meta or {}),
        "run": run,
        "rank_rng": rank_rng,
    }
    return atomic_write(path, lambda f: torch.save(state, f))


def _upgrade(state: dict) -> dict:
    """The dict of this format for a checkpoint written by the earlier SumGPT or BookGPT code."""
    if state.get("kind") == "sumgpt" and state.get("version") == 1:  # sumgpt.save_checkpoint
        meta = {"project": "sumgpt", "reverse": bool(state.get("reverse", True))}
        return {
            "format": FORMAT, "version": 1, "model_config": state["config"],
            "model": state["state_dict"], "optimizer": None, "step": 0, "history": {},
            "rng": None, "meta": {**meta, **state.get("meta", {})},
        }  # fmt: skip
    if state.get("format") == "bookgpt-checkpoint-1":  # bookgpt.save_checkpoint
        meta = {"project": "bookgpt", "run_config": state["run_config"], "itos": state["itos"]}
        return {
            "format": FORMAT, "version": 1, "model_config": state["gpt_config"],
            "model": state["model"], "optimizer": state["optimizer"], "step": state["step"],
            "history": state["history"],
            "rng": {"torch": state["rng"], "cuda": state["cuda_rng"]}, "meta": meta,
        }  # fmt: skip
    return state


def read_checkpoint(path, project: str | None = None) -> dict:
    """The checkpoint at ``path`` as a dict; :class:`CheckpointError` for a missing, corrupt,
    foreign or newer-version file, or one of another ``project`` than asked for."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist; train first, or check the path")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds (UnpicklingError, RuntimeError, ...)
        # torch's first sentence only: the advice after it differs from one torch to the next
        first = (str(err).strip().splitlines() or [""])[0].split(". ")[0][:200]
        raise CheckpointError(
            f"checkpoint {path} is corrupt or not a PyTorch file ({type(err).__name__}: {first});"
            f" delete it and train again"
        ) from None
    state = _upgrade(state) if isinstance(state, dict) else state
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(
            f"checkpoint {path} is not a course checkpoint (a {type(state).__name__} without "
            f"format {FORMAT!r}); point at a file that `sumgpt train` or `bookgpt train` wrote"
        )
    if state.get("version") not in READABLE:
        raise CheckpointError(
            f"checkpoint {path} has format version {state.get('version')!r}; this course_utils "
            f"reads versions {READABLE}: update the course (git pull, then make setup)"
        )
    found = state["meta"].get("project")
    if project is not None and found != project:
        raise CheckpointError(
            f"checkpoint {path} was written by {found!r}, not {project!r}; pass a {project} "
            f"checkpoint"
        )
    return state


def model_from_checkpoint(state: dict, path="checkpoint") -> GPT:
    """The :class:`GPT` a checkpoint holds, weights loaded, on the CPU in eval mode."""
    try:
        model = GPT(GPTConfig(**state["model_config"]))
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"checkpoint {path}: its model config is invalid ({err})") from None
    problems = weight_mismatches(model.state_dict(), state["model"])
    if problems:
        raise CheckpointError(f"checkpoint {path}: weights do not match its config: {problems}")
    model.load_state_dict(state["model"])
    return model.eval()


def weight_mismatches(expected: dict, found: dict) -> str:
    """What differs between two state dicts (missing or unexpected tensors, shapes); '' if none."""
    missing = sorted(expected.keys() - found.keys())
    unexpected = sorted(found.keys() - expected.keys())
    shapes = [
        f"{k} {tuple(found[k].shape)} != {tuple(v.shape)}"
        for k, v in expected.items()
        if k in found and tuple(found[k].shape) != tuple(v.shape)
    ]
    parts = []
    if missing:
        parts.append(f"missing {len(missing)} tensor(s), e.g. {missing[0]}")
    if unexpected:
        parts.append(f"{len(unexpected)} unexpected tensor(s), e.g. {unexpected[0]}")
    if shapes:
        parts.append(f"shape mismatch: {shapes[0]}")
    return "; ".join(parts)
