"""What this CPU multiplies fast: its class as oneDNN and ATen will run it, and a short measurement
of bf16 against fp32 at a model's width, cached per machine.

CPUs differ in the kernels they run for the same operation: an AMX Xeon multiplies bf16 matrices
in tiles, a Zen 4 EPYC with AVX512_BF16 in vector units, and an AVX2 laptop has no bf16 units at
all (a bf16 matmul there is emulated, many times slower than fp32). So precision ``auto`` asks
the CPU rather than a flag: :func:`cpu_class` names the class (capped by ``ONEDNN_MAX_CPU_ISA``
and ``ATEN_CPU_CAPABILITY``, which make one host behave like a smaller CPU), and
:func:`bf16_speedup` times a model's MLP (linear, GELU, linear, forward and backward) in fp32 and
under bf16 autocast, casts included, in a short probe, and remembers the answer per machine,
torch version, thread count and width in the user's cache folder.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from .atomic import atomic_write_text

CLASSES = ("other", "avx2", "avx512", "avx512_bf16", "amx")  # from least to most capable
BF16_CLASSES = ("avx512_bf16", "amx")  # with bf16 matrix or vector units
NO_BF16_CLASSES = ("avx2", "avx512")  # x86 without them: bf16 is emulated, never faster
DEFAULT_WIDTH = 128  # the width probed when the caller names none
ISA_ENV = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")  # oneDNN's cap (the second is its old name)
ATEN_ENV = "ATEN_CPU_CAPABILITY"
# oneDNN's ISA names (a prefix is enough: AVX512_CORE_VNNI is AVX-512 without bf16) -> a class.
ONEDNN_CAPS = (
    ("AVX512_CORE_AMX", "amx"),
    ("AVX10_1_512_AMX", "amx"),
    ("AVX512_CORE_BF16", "avx512_bf16"),
    ("AVX512_CORE_FP16", "avx512_bf16"),
    ("AVX10", "avx512_bf16"),
    ("AVX512", "avx512"),
    ("AVX2", "avx2"),
    ("AVX", "other"),
    ("SSE", "other"),
)
ATEN_CAPS = {"avx512": "amx", "avx2": "avx2", "default": "other"}  # AMX is oneDNN's, not ATen's
PROBE_ROWS = 1024  # rows of activations: 16 windows of 64 characters
PROBE_ROUNDS = 5
FAST_ENOUGH = 1.25  # bf16 counts as faster when its step takes at most 1/1.25 of fp32's
# For a run that compiles, bf16 where its eager step is no slower: compiling fuses the casts,
# norms and GELUs around the bf16 matmuls, which is where eager bf16 loses its gain at small
# widths. Measured: an AMX Xeon's width-64 probe read 1.03-1.21x (by the machine's load) where
# its compiled bf16 step was 1.5x fp32's, while AVX512_BF16 emulated on that Xeon read 0.70x and
# its compiled bf16 step was 4% slower than eager fp32; a higher bar would drop the Xeon.
COMPILED_ENOUGH = 1.0
STEADY = 1.5  # rounds whose slowest took over 1.5x the fastest were disturbed: not kept
# Other programs that took over a quarter of all CPUs' time during the probe disturbed it even
# when its rounds agree: a busy machine slows every small step alike (each waits for a core), so
# bf16 and fp32 read about equal and a bf16 CPU would be cached as fp32 for good.
BUSY = 0.25
MIN_TICKS = 10  # a shorter probe (in clock ticks of all CPUs together) is too short to tell
# Part of every cache key: raised when the probe changes, so answers an older probe kept (one
# may have been measured on a busy machine before BUSY was checked) are measured again.
PROBE_VERSION = 2


def hardware_class() -> str:
    """The class of this CPU's own instruction set (torch reads the CPU's flags)."""
    checks = (
        ("amx", "_is_amx_tile_supported"),
        ("avx512_bf16", "_is_avx512_bf16_supported"),
        ("avx512", "_is_avx512_supported"),
        ("avx2", "_is_avx2_supported"),
    )
    for name, probe in checks:
        try:
            if getattr(torch.cpu, probe)():
                return name
        except (AttributeError, RuntimeError):  # an older torch, or not an x86 CPU
            continue
    return "other"


def _capped(name: str, cap: str | None) -> str:
    return name if cap is None else CLASSES[min(CLASSES.index(name), CLASSES.index(cap))]


def onednn_cap() -> str | None:
    """The class oneDNN is capped at by ``ONEDNN_MAX_CPU_ISA`` (None: no cap)."""
    value = next((os.environ[v] for v in ISA_ENV if os.environ.get(v)), "").upper()
    if not value or value in ("ALL", "DEFAULT"):
        return None
    return next((cls for prefix, cls in ONEDNN_CAPS if value.startswith(prefix)), "other")


def aten_cap() -> str | None:
    """The class ATen's vectorized kernels are capped at by ``ATEN_CPU_CAPABILITY``."""
    value = os.environ.get(ATEN_ENV, "").lower()
    return ATEN_CAPS.get(value) if value else None


def cpu_class() -> str:
    """``amx``, ``avx512_bf16``, ``avx512``, ``avx2`` or ``other``: what this CPU runs, as
    emulated by ``ONEDNN_MAX_CPU_ISA`` and ``ATEN_CPU_CAPABILITY`` where they are set."""
    return _capped(_capped(hardware_class(), onednn_cap()), aten_cap())


@dataclass(frozen=True)
class BF16Probe:
    """One measurement: median seconds of the MLP step in fp32 and under bf16 autocast."""

    width: int
    fp32_s: float
    bf16_s: float
    cpu_class: str
    noisy: bool = False  # other programs disturbed the rounds: a guess, not to be kept

    @property
    def speedup(self) -> float:
        return self.fp32_s / self.bf16_s

    @property
    def faster(self) -> bool:
        return self.speedup >= FAST_ENOUGH


def _mlp_step(mlp: nn.Module, x: torch.Tensor, bf16: bool) -> float:
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        out = mlp(x)
    out.float().sum().backward()
    return time.perf_counter() - start


def measure_bf16(width: int, rows: int = PROBE_ROWS, rounds: int = PROBE_ROUNDS) -> BF16Probe:
    """Time a model's MLP (``width`` -> 4 x ``width`` -> ``width``, GELU between) in fp32 and
    under bf16 autocast, alternating after a warm-up, and keep each one's fastest round (the
    least disturbed by other programs); stop early when bf16 is plainly slower (an emulated bf16
    matmul takes many times as long). Rounds that spread over :data:`STEADY`, or other programs
    that took over :data:`BUSY` of the CPUs meanwhile, mark the probe noisy."""
    generator = torch.Generator().manual_seed(0)
    mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
    x = torch.randn(rows, width, generator=generator)
    ticks, own = cpu_ticks(), time.process_time()
    times: dict[bool, list[float]] = {False: [], True: []}
    for bf16 in (False, True):
        times[bf16].append(_mlp_step(mlp, x, bf16))  # warm-up: kernels chosen, caches filled
    for _ in range(rounds if times[True][0] < 4 * times[False][0] else 0):
        for bf16 in (False, True):
            times[bf16].append(_mlp_step(mlp, x, bf16))
    rounds_of = {k: times[k][1:] or times[k] for k in times}
    fp32, bf16 = (min(rounds_of[k]) for k in (False, True))
    noisy = any(max(r) > STEADY * min(r) for r in rounds_of.values() if len(r) > 1)
    others = others_share(ticks, cpu_ticks(), time.process_time() - own)
    return BF16Probe(width, fp32, bf16, cpu_class(), noisy or (others or 0.0) > BUSY)


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, all) clock ticks of the machine's CPUs together since boot, from Linux's
    ``/proc/stat`` (a hypervisor's steal counts as busy); None where there is no such file."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
        user, nice, system, idle, iowait, irq, softirq, steal = fields
    except (OSError, ValueError):
        return None
    return user + nice + system + irq + softirq + steal, sum(fields)


def others_share(before, after, own_seconds: float) -> float | None:
    """The share of all CPUs' time between two :func:`cpu_ticks` readings that went to other
    programs (the busy time less this process's ``own_seconds``); None when either reading is
    missing or the interval is under :data:`MIN_TICKS`."""
    if before is None or after is None or after[1] - before[1] < MIN_TICKS:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    busy, total = ((a - b) / hz for a, b in zip(after, before))
    return max(0.0, busy - own_seconds) / total


def cache_file() -> Path:
    """Where probe results are kept: the user's cache folder (``COURSE_CACHE_DIR`` overrides)."""
    folder = os.environ.get("COURSE_CACHE_DIR")
    if not folder:
        from platformdirs import user_cache_dir

        folder = user_cache_dir("course_utils")
    return Path(folder) / "bf16_probe.json"


def probe_key(width: int) -> str:
    """What a probe's answer depends on: the CPU, its emulated class, torch, threads, width, and
    the probe's own version."""
    isa = next((os.environ[v] for v in ISA_ENV if os.environ.get(v)), "")
    cpu = platform.processor() or platform.machine()
    parts = [cpu, _cpu_model(), hardware_class(), isa, os.environ.get(ATEN_ENV, ""),
             torch.__version__, str(torch.get_num_threads()), str(width),
             f"v{PROBE_VERSION}"]  # fmt: skip
    return "|".join(parts)


@functools.cache
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.platform()


def bf16_probe(width: int) -> BF16Probe:
    """:func:`measure_bf16` at ``width``, measured once per machine and remembered; the first
    measurement says what it found on stderr, once."""
    path, key = cache_file(), probe_key(width)
    if (path, key) not in _MEMO:
        _MEMO[path, key] = _cached_or_measured(path, key, width)
    return _MEMO[path, key]


_MEMO: dict[tuple[Path, str], BF16Probe] = {}  # this process's answers: one read per key


def _cached_or_measured(path: Path, key: str, width: int) -> BF16Probe:
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cached = {}
    if isinstance(cached.get(key), dict):
        try:
            return BF16Probe(**cached[key])
        except TypeError:
            pass
    probe = measure_bf16(width)
    if probe.noisy:  # a busy machine: use the guess now, measure again next time
        kept = "the machine was busy: not kept, measured again next time"
    else:
        cached[key] = asdict(probe)
        _write_cache(path, cached)
        kept = f"measured once, kept in {path}"
    print(f"course_utils: {describe(probe)} ({kept})", file=sys.stderr)
    return probe


def _write_cache(path: Path, data: dict) -> None:
    """Keep the probes with the course's one atomic writer (two kernels may probe at once)."""
    try:
        atomic_write_text(path, json.dumps(data, indent=1))
    except OSError:  # a read-only home: measure again next time
        pass


def describe(probe: BF16Probe) -> str:
    """One line: what the probe measured and what precision ``auto`` takes from it."""
    verdict = "bf16 autocast" if probe.faster else "fp32"
    compiled = not probe.faster and probe.speedup >= COMPILED_ENOUGH
    return (
        f"a width-{probe.width} MLP step took {1e3 * probe.fp32_s:.2f} ms in fp32 and "
        f"{1e3 * probe.bf16_s:.2f} ms under bf16 autocast on this {probe.cpu_class} CPU "
        f"({probe.speedup:.2f}x): precision auto is {verdict} here"
        + (" (bf16 autocast in a run long enough to compile)" if compiled else "")
    )
