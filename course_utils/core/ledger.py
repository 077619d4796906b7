"""Parameter ledger: where a model's parameters live, counted exactly, and what they cost in memory.

Shared (tied) tensors are counted once, in the row of the module that registered them first; the
ledger lists every other place that reuses them so that "tied" is visible rather than implied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torch import nn

MIB = 2**20

_GPT_COMPONENTS = (
    (re.compile(r"^tok_emb\."), lambda m: "token embedding"),
    (re.compile(r"^pos_emb\."), lambda m: "position embedding"),
    (re.compile(r"^blocks\.(\d+)\.attn\."), lambda m: f"block {m.group(1)} attention"),
    (re.compile(r"^blocks\.(\d+)\.mlp\."), lambda m: f"block {m.group(1)} MLP"),
    (re.compile(r"^blocks\.(\d+)\.ln_\d\."), lambda m: f"block {m.group(1)} norms"),
    (re.compile(r"^ln_f\."), lambda m: "final norm"),
    (re.compile(r"^head\."), lambda m: "head"),
)


def component_of(param_name: str) -> str:
    """The ledger row a parameter belongs to: a GPT component, else its owning module's path."""
    for pattern, label in _GPT_COMPONENTS:
        match = pattern.match(param_name)
        if match:
            return label(match)
    owner = param_name.rpartition(".")[0]
    return owner or "(root)"


@dataclass(frozen=True)
class LedgerRow:
    component: str
    params: int
    note: str = ""


def parameter_ledger(model: nn.Module) -> list[LedgerRow]:
    """One row per component, in registration order; the rows sum to the model's unique total."""
    totals: dict[str, int] = {}
    first_name: dict[int, str] = {}
    shared: list[tuple[str, str]] = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first_name:
            shared.append((name, first_name[id(p)]))
            continue
        first_name[id(p)] = name
        row = component_of(name)
        totals[row] = totals.get(row, 0) + p.numel()
    rows = [LedgerRow(component, n) for component, n in totals.items()]
    for name, original in shared:
        rows.append(LedgerRow(component_of(name), 0, f"tied: {name} is {original}, counted once"))
    return rows


def count_parameters(model: nn.Module, trainable_only: bool = False) -> int:
    """Unique parameters (tied tensors once); optionally only those with requires_grad."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes for the weights, their gradients and AdamW's two moments (exp_avg, exp_avg_sq)."""

    weights: int
    gradients: int
    adamw_state: int

    @property
    def total(self) -> int:
        return self.weights + self.gradients + self.adamw_state


def memory_estimate(model: nn.Module) -> MemoryEstimate:
    """Gradients and AdamW moments exist only for trainable parameters, in the parameter's dtype."""
    params = list(model.parameters())
    weights = sum(p.numel() * p.element_size() for p in params)
    trainable = [p for p in params if p.requires_grad]
    grads = sum(p.numel() * p.element_size() for p in trainable)
    return MemoryEstimate(weights, grads, 2 * grads)


def format_ledger(rows: list[LedgerRow]) -> str:
    """The ledger as a fixed-width table with a total line."""
    width = max([len("component"), *(len(r.component) for r in rows)])
    lines = [f"{'component':<{width}}  {'parameters':>12}", "-" * (width + 14)]
    for r in rows:
        note = f"  ({r.note})" if r.note else ""
        lines.append(f"{r.component:<{width}}  {r.params:>12,}{note}")
    lines.append("-" * (width + 14))
    lines.append(f"{'total':<{width}}  {sum(r.params for r in rows):>12,}")
    return "\n".join(lines)
