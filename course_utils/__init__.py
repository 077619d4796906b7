"""course_utils: the tested package behind the GPT-from-scratch course notebooks.

The layers (see ARCHITECTURE.md): ``core`` (what the lessons build), ``engine`` (the training
loop, checkpoints, atomic writes), ``lessons`` (checks, widgets, lesson helpers), ``projects``
(SumGPT, BookGPT) and ``tools`` (grading, labs, publishing, the command line). The names below
are the ones the lessons use most, importable from here wherever their module lives.
"""

import importlib

# name -> the module it lives in, imported on first use: ``python -m course_utils bookgpt
# prepare`` and the grader need no torch, whose import is slow.
_HOMES = {
    "frozen_decoder_config": "core.configs",
    "mini_lm_config": "core.configs",
    "named_config": "core.configs",
    "pick_device": "core.device",
    "count_parameters": "core.ledger",
    "format_ledger": "core.ledger",
    "memory_estimate": "core.ledger",
    "parameter_ledger": "core.ledger",
    "GPT": "core.model",
    "MLP": "core.model",
    "Block": "core.model",
    "CausalSelfAttention": "core.model",
    "GPTConfig": "core.model",
    "lm_loss": "core.model",
    "eval_mode": "core.modes",
    "build_model": "core.seeding",
    "randint": "core.seeding",
    "randn": "core.seeding",
    "seed_everything": "core.seeding",
    "CharTokenizer": "core.tokenizer",
    "History": "engine.training",
    "TrainConfig": "engine.training",
    "train": "engine.training",
    "CheckFailed": "lessons.checks",
    "check_tensor": "lessons.checks",
    "check_true": "lessons.checks",
    "check_value": "lessons.checks",
}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


__all__ = [  # noqa: F822  (imported on first use by __getattr__)
    "GPT",
    "MLP",
    "Block",
    "CausalSelfAttention",
    "CharTokenizer",
    "CheckFailed",
    "GPTConfig",
    "History",
    "TrainConfig",
    "build_model",
    "check_tensor",
    "check_true",
    "check_value",
    "count_parameters",
    "eval_mode",
    "format_ledger",
    "frozen_decoder_config",
    "lm_loss",
    "memory_estimate",
    "mini_lm_config",
    "named_config",
    "parameter_ledger",
    "pick_device",
    "randint",
    "randn",
    "seed_everything",
    "train",
]
