"""What a run recorded, kept in the checkpoint and written to ``log.json``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class History:
    """What a run recorded: one loss, learning rate and gradient norm per update, one dict per
    evaluation (``step``, ``seconds`` of training so far, then the metrics) and one per log
    point of throughput (``step``, ``tokens_per_s``, and ``mfu`` where a peak is known)."""

    losses: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)
    seconds: float = 0.0  # wall time spent in training steps, evaluations excluded
    stopped_early: bool = False
    throughput: list[dict] = field(default_factory=list)
    stop_reason: str = ""  # why the run ended: "steps", "time_budget", "stop_when", ...

    @property
    def steps(self) -> int:
        return len(self.losses)

    def metric(self, name: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one evaluation metric, ready to plot."""
        rows = [e for e in self.evals if name in e]
        return [e["step"] for e in rows], [e[name] for e in rows]

    def first_step_reaching(self, name: str, threshold: float) -> dict | None:
        """The first evaluation whose ``name`` is >= ``threshold`` (None if none did)."""
        return next((e for e in self.evals if e.get(name, -math.inf) >= threshold), None)

    def to_dict(self) -> dict:
        return {
            "losses": list(self.losses),
            "lrs": list(self.lrs),
            "grad_norms": list(self.grad_norms),
            "evals": [dict(e) for e in self.evals],
            "seconds": self.seconds,
            "stopped_early": self.stopped_early,
            "throughput": [dict(t) for t in self.throughput],
            "stop_reason": self.stop_reason,
        }

    @classmethod
    def from_dict(cls, d: dict) -> History:
        return cls(
            losses=list(d.get("losses", [])),
            lrs=list(d.get("lrs", [])),
            grad_norms=list(d.get("grad_norms", [])),
            evals=[dict(e) for e in d.get("evals", [])],
            seconds=float(d.get("seconds", 0.0)),
            stopped_early=bool(d.get("stopped_early", False)),
            throughput=[dict(t) for t in d.get("throughput", [])],
            stop_reason=str(d.get("stop_reason", "")),
        )
