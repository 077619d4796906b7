"""course_utils: the tested package behind the GPT-from-scratch course notebooks.

The layers (see ARCHITECTURE.md): ``core`` (what the lessons build), ``engine`` (the training
loop, checkpoints, atomic writes), ``lessons`` (checks, widgets, lesson helpers), ``projects``
(SumGPT, BookGPT) and ``tools`` (grading, labs, publishing, the command line). The names below
are the ones the lessons use most, importable from here wherever their module lives.
"""

from .core.configs import frozen_decoder_config, mini_lm_config, named_config
from .core.device import pick_device
from .core.ledger import count_parameters, format_ledger, memory_estimate, parameter_ledger
from .core.model import GPT, MLP, Block, CausalSelfAttention, GPTConfig, lm_loss
from .core.modes import eval_mode
from .core.seeding import build_model, randint, randn, seed_everything
from .core.tokenizer import CharTokenizer
from .engine.training import History, TrainConfig, train
from .lessons.checks import CheckFailed, check_tensor, check_true, check_value

__all__ = [
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
