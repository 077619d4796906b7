"""course_utils: the tested package behind the GPT-from-scratch course notebooks."""

from .core.configs import frozen_decoder_config, mini_lm_config, named_config
from .core.device import pick_device
from .core.ledger import (
    count_parameters,
    format_ledger,
    memory_estimate,
    parameter_ledger,
)
from .core.model import GPT, MLP, Block, CausalSelfAttention, GPTConfig, lm_loss
from .core.seeding import build_model, randint, randn, seed_everything
from .core.tokenizer import CharTokenizer
from .lessons.checks import CheckFailed, check_tensor, check_true, check_value

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
    "mini_lm_config",
    "seed_everything",
]
