"""The frozen-decoder audit: every contract of a decoder, checked in a fixed order.

``audit(model, batch)`` runs eight checks on a :class:`course_utils.core.model.GPT` and a batch
``(inputs, targets)`` in the frozen-decoder audit's order, prints a pass/fail line per check and
returns an :class:`AuditReport`:

1. ID and context ranges            5. tied parameter identity and vocabulary logits
2. lookup and position rows         6. input-target shift
3. block shapes and causal interventions   7. vocabulary-axis cross-entropy and valid denominator
4. final-normalization axis         8. complete parameter ledger

``make_batch`` builds such a batch from token strings (``"A B C"`` -> inputs ``<bos> A B C``,
targets ``A B C <eos>``), and ``broken_model`` builds the three broken decoders the audit must
catch: a final norm over the wrong axis, a head that is untied although the config says tied,
and attention without its causal mask.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from ..core.configs import frozen_decoder_config
from ..core.ledger import count_parameters, parameter_ledger
from ..core.model import GPT, CausalSelfAttention, GPTConfig
from ..core.modes import eval_mode
from ..core.seeding import build_model

VOCAB = ("<pad>", "<bos>", "<eos>", "A", "B", "C", "D", "E")  # the frozen decoder's V = 8 tokens
PAD, BOS, EOS = 0, 1, 2
IGNORE_INDEX = -100  # the target of a padded position: left out of the loss

CHECKS = (
    "ID and context ranges",
    "lookup and position rows",
    "block shapes and causal interventions",
    "final-normalization axis",
    "tied parameter identity and vocabulary logits",
    "input-target shift",
    "vocabulary-axis cross-entropy and valid denominator",
    "complete parameter ledger",
)

# ---- batches ------------------------------------------------------------------------------


def encode(text: str) -> list[int]:
    """'A B C' -> [3, 4, 5]: space-separated token names of :data:`VOCAB`."""
    try:
        return [VOCAB.index(name) for name in text.split()]
    except ValueError:
        raise ValueError(f"{text!r} holds a name that is not one of {VOCAB}") from None


def decode(ids) -> str:
    return " ".join(VOCAB[int(i)] if int(i) >= 0 else "-" for i in ids)


def make_batch(
    sequences: list[str], context: int = 4, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The target contract: each sequence becomes ``<bos> s <eos>``, padded with ``<pad>`` to
    ``context + 1`` tokens; inputs are tokens[:-1], targets tokens[1:], and a target that is
    padding becomes IGNORE_INDEX. Returns (inputs, targets), each (len(sequences), context)."""
    rows = []
    for text in sequences:
        tokens = [BOS, *encode(text), EOS]
        if len(tokens) > context + 1:
            raise ValueError(
                f"{text!r} needs {len(tokens) - 1} positions with <bos> and <eos>, but the "
                f"context holds {context}"
            )
        rows.append(tokens + [PAD] * (context + 1 - len(tokens)))
    tokens = torch.tensor(rows)
    inputs, targets = tokens[:, :-1], tokens[:, 1:].clone()
    targets[targets == PAD] = IGNORE_INDEX
    device = device if device is not None else "cpu"
    return inputs.to(device), targets.to(device)


# ---- the expected ledger ------------------------------------------------------------------


def expected_ledger(config: GPTConfig) -> dict[str, int]:
    """Parameters per component, from the configuration alone (per block for the block rows)."""
    V, C, d, F_ = config.vocab_size, config.block_size, config.n_embd, config.hidden_dim
    norm = d if config.norm == "rmsnorm" or not config.norm_bias else 2 * d
    mlp_mats = 3 if config.activation == "swiglu" else 2
    mlp_bias = ((mlp_mats - 1) * F_ + d) if config.mlp_bias else 0
    head = (0 if config.tie_weights else V * d) + (V if config.head_bias else 0)
    return {
        "token embedding": V * d,
        "position embedding": C * d,
        "attention": 4 * d * d + (4 * d if config.attn_bias else 0),
        "MLP": mlp_mats * d * F_ + mlp_bias,
        "norms": 2 * norm,
        "final norm": norm,
        "head": head,
    }


def expected_total(config: GPTConfig) -> int:
    e = expected_ledger(config)
    block = e["attention"] + e["MLP"] + e["norms"]
    return (
        e["token embedding"]
        + e["position embedding"]
        + config.n_layer * block
        + e["final norm"]
        + e["head"]
    )


def ledger_sum(config: GPTConfig) -> str:
    """'32 + 16 + 2 x (64 + 76 + 16) + 8 + 0 = 368' for the tied frozen decoder."""
    e = expected_ledger(config)
    return (
        f"{e['token embedding']:,} + {e['position embedding']:,} + {config.n_layer} x "
        f"({e['attention']:,} + {e['MLP']:,} + {e['norms']:,}) + {e['final norm']:,} + "
        f"{e['head']:,} = {expected_total(config):,}"
    )


# ---- the report ---------------------------------------------------------------------------


@dataclass
class CheckResult:
    step: int
    name: str
    passed: bool
    detail: str


@dataclass
class AuditReport:
    checks: list[CheckResult] = field(default_factory=list)
    loss: float | None = None  # the mean cross-entropy over the valid targets

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if not c.passed]

    @property
    def first_failure(self) -> str | None:
        return next((c.name for c in self.checks if not c.passed), None)

    def __str__(self) -> str:
        lines = [
            f"{c.step}. [{'PASS' if c.passed else 'FAIL'}] {c.name}\n     {c.detail}"
            for c in self.checks
        ]
        n = sum(c.passed for c in self.checks)
        lines.append(f"{n} of {len(self.checks)} checks passed")
        return "\n".join(lines)


class _Failed(Exception):
    """A check's contract does not hold; the message says how."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise _Failed(message)


def _positions(mask: torch.Tensor) -> str:
    return ", ".join(str(int(i)) for i in torch.nonzero(mask).flatten())


# ---- the eight checks ---------------------------------------------------------------------


def _check_ranges(model, x, y, trace, tol):
    cfg = model.config
    V, C = cfg.vocab_size, cfg.block_size
    B, T = x.shape
    _require(x.dtype in (torch.int64, torch.int32), f"input dtype {x.dtype} is not integer")
    low, high = int(x.min()), int(x.max())
    _require(0 <= low and high < V, f"input ids span [{low}, {high}], outside [0, {V - 1}]")
    _require(1 <= T <= C, f"T = {T} is outside the context range [1, {C}]")
    valid = y != IGNORE_INDEX
    _require(bool(valid.any()), "every target is ignored: nothing to learn from")
    yv = y[valid]
    _require(
        int(yv.min()) >= 0 and int(yv.max()) < V,
        f"valid target ids span [{int(yv.min())}, {int(yv.max())}], outside [0, {V - 1}]",
    )
    # The model's own guard, called directly: feeding an out-of-range id to an embedding on a
    # GPU would be a device-side assert rather than an exception.
    guard = getattr(model, "check_input", None)
    _require(guard is not None, "the model has no input check (check_input)")
    rejected = []
    for bad, what in ((torch.full_like(x[:, :1], V), f"id {V}"), (x.new_zeros(B, C + 1), "")):
        try:
            guard(bad)
        except ValueError:
            rejected.append(what or f"T = {C + 1}")
    _require(
        len(rejected) == 2,
        f"the model accepted out-of-range input (it rejected only {rejected or 'nothing'})",
    )
    return f"ids in [0, {V - 1}], T = {T} <= C = {C}; the model rejects {' and '.join(rejected)}"


def _check_lookup(model, x, y, trace, tol):
    E, P = model.tok_emb.weight, model.pos_emb.weight
    cfg = model.config
    _require(
        tuple(E.shape) == (cfg.vocab_size, cfg.n_embd),
        f"E has shape {tuple(E.shape)}, expected (V, d) = ({cfg.vocab_size}, {cfg.n_embd})",
    )
    _require(
        tuple(P.shape) == (cfg.block_size, cfg.n_embd),
        f"P has shape {tuple(P.shape)}, expected (C, d) = ({cfg.block_size}, {cfg.n_embd})",
    )
    T = x.size(1)
    expected = E[x] + P[:T]
    X0 = trace["X"][0]
    _require(X0.shape == expected.shape, f"X0 has shape {tuple(X0.shape)}")
    _require(
        torch.allclose(X0, expected, atol=tol), "X0 differs from E[I] + P[:T] (lookup or rows)"
    )
    return f"X0 = E[I] + P[:{T}], shape {tuple(X0.shape)}; E {tuple(E.shape)}, P {tuple(P.shape)}"


def _check_blocks(model, x, y, trace, tol):
    X = trace["X"]
    B, T, d = X[0].shape
    g = torch.Generator().manual_seed(0)
    for layer, block in enumerate(model.blocks):
        _require(
            X[layer + 1].shape == X[layer].shape,
            f"block {layer} maps {tuple(X[layer].shape)} to {tuple(X[layer + 1].shape)}",
        )
        base = block(X[layer])
        for t in range(T):
            nudged = X[layer].clone()
            nudged[:, t] += torch.randn(B, d, generator=g).to(nudged.device)
            change = (block(nudged) - base).abs().amax(dim=(0, 2))  # per position
            leaked = change[:t] > tol
            _require(
                not bool(leaked.any()),
                f"block {layer}: changing position {t} changed earlier position(s) "
                f"{_positions(leaked)}: the future leaks backwards (is the causal mask applied?)",
            )
            _require(bool(change[t] > tol), f"block {layer}: position {t} ignores its own input")
    return (
        f"{len(model.blocks)} blocks keep {(B, T, d)}; nudging row t changes no row before t "
        f"(every t < {T})"
    )


def _normalize(x: torch.Tensor, dim: int, norm: nn.Module, rms: bool) -> torch.Tensor:
    if rms:
        y = x * torch.rsqrt(x.pow(2).mean(dim, keepdim=True) + norm.eps)
    else:
        mean = x.mean(dim, keepdim=True)
        var = x.var(dim, unbiased=False, keepdim=True)
        y = (x - mean) / torch.sqrt(var + norm.eps)
    y = y * norm.weight
    return y + norm.bias if getattr(norm, "bias", None) is not None else y


def _check_final_norm(model, x, y, trace, tol):
    X2, N = trace["ln_f_in"], trace["ln_f_out"]
    rms = model.config.norm == "rmsnorm"
    kind = "RMSNorm" if rms else "LayerNorm"
    _require(N.shape == X2.shape, f"N_f changes the shape {tuple(X2.shape)} to {tuple(N.shape)}")
    if torch.allclose(N, _normalize(X2, -1, model.ln_f, rms), atol=tol):
        return f"N_f is a {kind} over the feature axis (-1, size {X2.size(-1)}) of every row"
    names = {0: "batch", 1: "time"}
    found = [
        f"axis {dim} ({names[dim]})"
        for dim in (0, 1)
        if X2.size(dim) > 1 and torch.allclose(N, _normalize(X2, dim, model.ln_f, rms), atol=tol)
    ]
    where = f"; it normalizes over {found[0]}" if found else ""
    raise _Failed(f"N_f(X2) is not a {kind} over the feature axis (-1){where}")


def _check_tied(model, x, y, trace, tol):
    cfg = model.config
    W = model.head.weight
    E = model.tok_emb.weight
    if cfg.tie_weights:
        same = W is E and W.data_ptr() == E.data_ptr()
        _require(
            same,
            "config says tie_weights=True but head.weight is a separate tensor "
            f"(equal values now: {bool(torch.equal(W, E))}; training would pull them apart)",
        )
    else:
        _require(W is not E, "config says untied but head.weight is tok_emb.weight")
    Z, N = trace["logits"], trace["ln_f_out"]
    B, T = x.shape
    want = (B, T, cfg.vocab_size)
    _require(tuple(Z.shape) == want, f"Z has shape {tuple(Z.shape)}, expected (B, T, V) = {want}")
    expected = N @ W.T
    if model.head.bias is not None:
        expected = expected + model.head.bias
    _require(torch.allclose(Z, expected, atol=tol), "Z is not N_f(X2) @ W_U^T")
    tie = "head.weight is tok_emb.weight (one tensor)" if cfg.tie_weights else "untied head"
    return f"{tie}; Z = N_f(X2) @ E^T has shape {want}"


def _check_shift(model, x, y, trace, tol):
    _require(y.shape == x.shape, f"targets {tuple(y.shape)} vs inputs {tuple(x.shape)}")
    valid = y[:, :-1] != IGNORE_INDEX
    wrong = valid & (y[:, :-1] != x[:, 1:])
    n = int(valid.sum())
    _require(
        not bool(wrong.any()),
        f"{int(wrong.sum())} of {n} targets are not the next input token (targets[:, t] must "
        "equal inputs[:, t + 1])",
    )
    same = (y == x) & (y != IGNORE_INDEX)
    _require(not bool(same.all()), "targets equal the inputs: the shift by one is missing")
    return f"targets[:, t] == inputs[:, t + 1] at all {n} valid positions t < T - 1"


def _check_loss(model, x, y, trace, tol):
    Z = trace["logits"].float()
    V = model.config.vocab_size
    valid = y != IGNORE_INDEX
    z = Z[valid]  # (n_valid, V): one row per included target
    m = z.amax(dim=-1, keepdim=True)
    lse = (m + (z - m).exp().sum(dim=-1, keepdim=True).log()).squeeze(-1)
    rows = lse - z.gather(-1, y[valid].unsqueeze(-1)).squeeze(-1)
    n_valid, n_all = int(valid.sum()), y.numel()
    ours = rows.sum() / n_valid
    torch_loss = F.cross_entropy(Z.reshape(-1, V), y.reshape(-1), ignore_index=IGNORE_INDEX)
    _require(bool(torch.isfinite(ours)), "the loss is not finite")
    _require(
        torch.allclose(ours, torch_loss, atol=1e-5),
        "mean of -z_y + logsumexp(z) over the valid rows differs from F.cross_entropy",
    )
    trace["loss"] = float(ours)
    return (
        f"-z_y + logsumexp(z) over V = {V}, averaged over {n_valid} valid of {n_all} "
        "positions, equals F.cross_entropy(ignore_index=-100)"
    )


def _check_ledger(model, x, y, trace, tol):
    cfg = model.config
    rows = {r.component: r.params for r in parameter_ledger(model)}
    total = count_parameters(model)
    _require(sum(rows.values()) == total, "the ledger rows do not sum to the parameter count")
    e = expected_ledger(cfg)
    want = {
        "token embedding": e["token embedding"],
        "position embedding": e["position embedding"],
        **{
            f"block {i} {part}": e[part]
            for i in range(cfg.n_layer)
            for part in ("attention", "MLP", "norms")
        },
        "final norm": e["final norm"],
        "head": e["head"],
    }
    for name, n in want.items():
        got = rows.get(name, 0)
        _require(got == n, f"{name}: {got:,} parameters, the config implies {n:,}")
    extra = sorted(set(rows) - set(want))
    _require(not extra, f"unexpected ledger rows: {extra}")
    _require(total == expected_total(cfg), f"total {total:,} != {expected_total(cfg):,}")
    return ledger_sum(cfg) + " parameters, every row as the config implies"


_RUNNERS = (
    _check_ranges,
    _check_lookup,
    _check_blocks,
    _check_final_norm,
    _check_tied,
    _check_shift,
    _check_loss,
    _check_ledger,
)


def _trace(model: GPT, x: torch.Tensor) -> dict:
    """One forward pass that records X0 .. XL (block inputs and outputs), N_f's input and
    output, and the logits Z."""
    trace: dict = {"X": [None] * (len(model.blocks) + 1)}
    hooks = []
    for i, block in enumerate(model.blocks):

        def record(module, args, out, i=i):
            trace["X"][i], trace["X"][i + 1] = args[0], out

        hooks.append(block.register_forward_hook(record))

    def record_norm(module, args, out):
        trace["ln_f_in"], trace["ln_f_out"] = args[0], out

    hooks.append(model.ln_f.register_forward_hook(record_norm))
    try:
        trace["logits"] = model(x)
    finally:
        for h in hooks:
            h.remove()
    return trace


@torch.no_grad()
def audit(
    model: GPT, batch: tuple[torch.Tensor, torch.Tensor], verbose: bool = True, tol: float = 1e-5
) -> AuditReport:
    """Run the eight checks in the audit's order on ``batch = (inputs, targets)`` (targets of
    ignored positions are IGNORE_INDEX), print a PASS/FAIL line per check and return the report.
    Every check runs even after a failure, so the report shows everything that is wrong."""
    device = next(model.parameters()).device
    x, y = (t.to(device) for t in batch)
    report = AuditReport()
    with eval_mode(model):
        try:
            trace = _trace(model, x)
        except Exception as err:  # the forward pass itself failed: every check fails
            trace = None
            reason = f"the forward pass raised {type(err).__name__}: {err}"
        for step, (name, run) in enumerate(zip(CHECKS, _RUNNERS), start=1):
            if trace is None:
                report.checks.append(CheckResult(step, name, False, reason))
                continue
            try:
                detail, passed = run(model, x, y, trace, tol), True
            except _Failed as err:
                detail, passed = str(err), False
            except Exception as err:  # a check that crashes is a failed check, with its reason
                detail, passed = f"{type(err).__name__}: {err}", False
            report.checks.append(CheckResult(step, name, passed, detail))
        if trace is not None:
            report.loss = trace.get("loss")
    if verbose:
        print(report)
    return report


# ---- three broken decoders ----------------------------------------------------------------


class TimeAxisLayerNorm(nn.LayerNorm):
    """BUG: normalizes every feature over the time axis (dim 1) instead of every position over
    its features, so each row's output depends on the other positions, later ones included."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=1, keepdim=True)
        var = x.var(dim=1, unbiased=False, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class UntiedHeadGPT(GPT):
    """BUG: the config says ``tie_weights=True``, but the head gets its own copy of the embedding
    matrix: equal numbers today, two tensors that training updates separately."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__(config)
        self.head.weight = nn.Parameter(self.tok_emb.weight.detach().clone())


class UnmaskedAttention(CausalSelfAttention):
    """BUG: the softmax runs over every key, so position t attends to positions after t."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self._heads(x)
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).softmax(dim=-1)
        y = (weights @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


BROKEN = {
    "wrong norm axis": "final-normalization axis",
    "untied but claimed tied": "tied parameter identity and vocabulary logits",
    "missing causal mask": "block shapes and causal interventions",
}


def broken_model(kind: str, seed: int = 0, device=None) -> GPT:
    """The frozen decoder built with ``seed`` (same weights as the sound one), with one bug:
    'wrong norm axis', 'untied but claimed tied' or 'missing causal mask'."""
    config = frozen_decoder_config()
    if kind == "untied but claimed tied":
        return build_model(UntiedHeadGPT, config, seed=seed, device=device)
    model = build_model(GPT, config, seed=seed, device=device)
    dev = next(model.parameters()).device
    if kind == "wrong norm axis":
        norm = TimeAxisLayerNorm(config.n_embd, eps=config.norm_eps)
        norm.load_state_dict(model.ln_f.state_dict())
        model.ln_f = norm.to(dev)
    elif kind == "missing causal mask":
        for block in model.blocks:
            attn = UnmaskedAttention(config)
            attn.load_state_dict(block.attn.state_dict())
            block.attn = attn.to(dev)
    else:
        raise ValueError(f"unknown kind {kind!r}: choose one of {sorted(BROKEN)}")
    return model


def mystery_models(seed: int = 0, device=None) -> dict[str, GPT]:
    """Four frozen decoders named 'P', 'Q', 'R', 'S' for a diagnosis exercise: one is sound, the
    other three carry one bug each (the kinds of :data:`BROKEN`), in an order set by ``seed``."""
    kinds = [None, *sorted(BROKEN)]
    order = torch.randperm(len(kinds), generator=torch.Generator().manual_seed(seed)).tolist()
    models = {}
    for name, i in zip("PQRS", order):
        kind = kinds[i]
        if kind is None:
            models[name] = build_model(GPT, frozen_decoder_config(), seed=seed, device=device)
        else:
            models[name] = broken_model(kind, seed=seed, device=device)
    return models
