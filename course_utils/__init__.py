"""course_utils: the tested package behind the GPT-from-scratch course notebooks."""

from .checks import CheckFailed, check_tensor, check_true, check_value
from .configs import frozen_decoder_config, named_config, seed000_config
from .device import build_model, pick_device, randint, randn, seed_everything
from .ledger import (
    count_parameters,
    format_ledger,
    memory_estimate,
    parameter_ledger,
)
from .model import GPT, MLP, Block, CausalSelfAttention, GPTConfig, lm_loss
from .tokenizer import CharTokenizer

__all__ = [
    "GPT",
    "MLP",
    "Block",
    "CausalSelfAttention",
    "CharTokenizer",
    "CheckFailed",
    "GPTConfig",
    "build_model",
    "check_tensor",
    "check_true",
    "check_value",
    "count_parameters",
    "format_ledger",
    "frozen_decoder_config",
    "lm_loss",
    "memory_estimate",
    "named_config",
    "parameter_ledger",
    "pick_device",
    "randint",
    "randn",
    "seed000_config",
    "seed_everything",
]
