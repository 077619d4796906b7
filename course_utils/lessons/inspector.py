"""The model inspector (the torch.nn internals chapter's capstone): parameter split, memory,
and a container audit.

``python -m course_utils inspect --dim 1024 --layers 12`` inspects the chapter's MLP stack;
``--config NAME`` inspects one of the course's transformer configurations instead.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from torch import nn

from ..core.cli import command_parser, run_command
from ..core.configs import NAMED_CONFIGS, named_config
from ..core.ledger import MIB, MemoryEstimate, format_ledger, memory_estimate, parameter_ledger
from ..core.model import GPT


def mlp_stack(dim: int, layers: int) -> nn.Sequential:
    """The torch.nn internals chapter's test model: ``layers`` x [Linear(dim, 4 dim), GELU,
    Linear(4 dim, dim)]."""
    modules: list[nn.Module] = []
    for _ in range(layers):
        modules += [nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)]
    return nn.Sequential(*modules)


def hidden_modules(model: nn.Module) -> list[str]:
    """Modules stored in plain Python lists, tuples or dicts: invisible to ``.parameters()``,
    ``.to()`` and ``state_dict()``. Returns one ``path[index] (Class)`` entry per module found."""
    found = []
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr == "_modules":  # the registry itself: these are the registered ones
                continue
            if isinstance(value, dict):
                items = value.items()
            elif isinstance(value, (list, tuple)):
                items = enumerate(value)
            else:
                continue
            for key, item in items:
                if isinstance(item, nn.Module):
                    where = f"{path}.{attr}" if path else attr
                    found.append(f"{where}[{key!r}] ({type(item).__name__})")
    return found


@dataclass
class Inspection:
    total: int
    trainable: int
    memory: MemoryEstimate
    hidden: list[str]

    @property
    def frozen(self) -> int:
        return self.total - self.trainable


def inspect_model(model: nn.Module) -> Inspection:
    params = list(model.parameters())
    total = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    return Inspection(total, trainable, memory_estimate(model), hidden_modules(model))


def _size(n_bytes: int) -> str:
    return f"{n_bytes / MIB:10.2f} MiB ({n_bytes:,} bytes)"


def format_inspection(report: Inspection) -> str:
    def share(n: int) -> str:
        return f"{100 * n / report.total:.2f}%" if report.total else "n/a"

    m = report.memory
    lines = [
        f"parameters:  {report.total:,}",
        f"  trainable: {report.trainable:,} ({share(report.trainable)})",
        f"  frozen:    {report.frozen:,} ({share(report.frozen)})",
        "memory for training with AdamW (MiB = 2**20 bytes):",
        f"  weights:     {_size(m.weights)}",
        f"  gradients:   {_size(m.gradients)}",
        f"  AdamW state: {_size(m.adamw_state)}",
        f"  total:       {_size(m.total)}",
        "container audit:",
    ]
    if report.hidden:
        lines += [
            f"  HIDDEN: {h} is invisible to .parameters(); wrap it in nn.ModuleList/ModuleDict"
            for h in report.hidden
        ]
    else:
        lines.append("  ok: no modules hidden in plain Python lists, tuples or dicts")
    return "\n".join(lines)


class _ListTrap(nn.Module):
    """A deliberately broken model for --list-trap-demo: its layers sit in a plain list."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.layers = [nn.Linear(dim, dim), nn.Linear(dim, dim)]
        self.out = nn.Linear(dim, 1)


def configure(parser: argparse.ArgumentParser) -> None:
    """The ``inspect`` command's arguments."""
    parser.description = (
        "Count parameters (trainable and frozen), estimate training memory and find modules "
        "hidden in plain Python containers."
    )
    parser.epilog = (
        "examples:\n  python -m course_utils inspect --dim 1024 --layers 12\n  python -m "
        "course_utils inspect --config mini-lm-L2 --freeze tok_emb\n  python -m course_utils "
        "inspect --list-trap-demo"
    )
    parser.add_argument("--dim", type=int, default=1024, help="MLP stack width (default 1024)")
    parser.add_argument("--layers", type=int, default=12, help="MLP stack depth (default 12)")
    parser.add_argument("--config", choices=sorted(NAMED_CONFIGS), help="a course transformer")
    parser.add_argument(
        "--freeze",
        action="append",
        default=[],
        metavar="PREFIX",
        help="freeze parameters whose name starts with PREFIX (repeatable)",
    )
    parser.add_argument(
        "--list-trap-demo", action="store_true", help="inspect a model that hides layers in a list"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the model ``args`` describe and print its inspection."""
    if args.dim < 1 or args.layers < 1:
        raise ValueError("--dim and --layers must be >= 1")

    if args.list_trap_demo:
        model, title = _ListTrap(args.dim), f"list-trap demo (dim {args.dim})"
    elif args.config:
        model, title = GPT(named_config(args.config)), f"config {args.config}"
    else:
        model = mlp_stack(args.dim, args.layers)
        title = f"MLP stack: {args.layers} x [Linear({args.dim}, {4 * args.dim}), GELU, "
        title += f"Linear({4 * args.dim}, {args.dim})]"
    for name, p in model.named_parameters():
        if any(name.startswith(prefix) for prefix in args.freeze):
            p.requires_grad_(False)

    print(title)
    print(format_inspection(inspect_model(model)))
    if args.config:
        print()
        print(format_ledger(parameter_ledger(model)))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command(command_parser("python -m course_utils inspect", configure), argv)
