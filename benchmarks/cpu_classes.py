"""Run a benchmark once per CPU class, each in a subprocess that behaves like that class.

CPUs run different kernels for the same operation (an AMX Xeon, an AVX512_BF16 EPYC, an
AVX-512 server without bf16, an AVX2 laptop), and which settings are fastest depends on the
class. oneDNN and ATen can be told to act like a smaller CPU on any x86 host
(``ONEDNN_MAX_CPU_ISA``, ``ATEN_CPU_CAPABILITY``), so one machine measures them all: a
benchmark's ``--cpu-class amx,avx2`` runs the same script again with ``--cpu-class native`` in a
child process per class, with that class's variables set, and prints each child's tables under
a heading naming the class and the host it was emulated on.
"""

from __future__ import annotations

import os
import subprocess
import sys

from course_utils.core import cpu

# class -> the variables that make this host run that class's kernels (native: none)
EMULATION = {
    "native": {},
    "amx": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX", "ATEN_CPU_CAPABILITY": "avx512"},
    "avx512_bf16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16", "ATEN_CPU_CAPABILITY": "avx512"},
    "avx512": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "ATEN_CPU_CAPABILITY": "avx512"},
    "avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
}
OPTION = "--cpu-class"
HELP = (
    "CPU classes to run, comma-separated: native (this host as it is), amx, avx512_bf16, avx512, "
    "avx2, or all (every class up to this host's own), each emulated in a subprocess"
)


def add_option(parser) -> None:
    """The shared ``--cpu-class`` option of the benchmarks."""
    parser.add_argument(OPTION, default="native", help=HELP)


def classes(text: str) -> list[str]:
    """The classes ``--cpu-class`` names; a class above this host's own is refused (it cannot be
    emulated) with a message naming what the host can do."""
    host = cpu.hardware_class()
    reachable = [c for c in cpu.CLASSES[1 : cpu.CLASSES.index(host) + 1]][::-1]
    names = reachable if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name not in EMULATION:
            raise SystemExit(f"unknown CPU class {name!r}; choose from {', '.join(EMULATION)}")
        if name != "native" and name not in reachable:
            raise SystemExit(
                f"this host is an {host} CPU: it can emulate {', '.join(reachable)}, not {name}"
            )
    return names


def run_per_class(argv: list[str], names: list[str]) -> int:
    """Run this script (``sys.argv[0]``) once per class with ``argv`` and ``--cpu-class
    native``; its output streams through under a heading (:func:`_stream`). The worst exit
    status is returned."""
    status = 0
    for name in names:
        env = {**os.environ, **EMULATION[name]}
        for var in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY"):
            if name == "native":
                env.pop(var, None)
        child = [sys.executable, sys.argv[0], *strip_option(argv), OPTION, "native"]
        print(f"\n## CPU class {name}: {heading(name)}\n", flush=True)
        status = max(status, _stream(child, env))
    return status


def _stream(command: list[str], env: dict) -> int:
    """Run ``command`` and return its exit status. While ``--results`` records this process's
    output (``benchmarks/record.py``), the child's lines are passed on through it, so that every
    class's tables are recorded; otherwise the child writes to the terminal itself."""
    if not getattr(sys.stdout, "records_children", False):
        sys.stdout.flush()
        return subprocess.call(command, env=env)
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True, bufsize=1) as child:
        for line in child.stdout:
            print(line, end="", flush=True)
    return child.returncode


def heading(name: str) -> str:
    host = f"an {cpu.hardware_class()} host ({cpu._cpu_model()})"
    if name == "native":
        return f"{host} as it is"
    variables = " ".join(f"{k}={v}" for k, v in EMULATION[name].items())
    return f"emulated on {host} with {variables}"


def strip_option(argv: list[str]) -> list[str]:
    """``argv`` without ``--cpu-class X`` / ``--cpu-class=X``."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == OPTION:
            skip = True
        elif not arg.startswith(f"{OPTION}="):
            out.append(arg)
    return out


def auto_line(device, width: int) -> str:
    """What precision ``auto`` picks here for a model of ``width``, and why (one line)."""
    from course_utils.core.device import precision_reason

    return f"auto here: {precision_reason(device, width)}"


def dispatch(argv: list[str], chosen: str) -> int | None:
    """What a benchmark's ``main`` calls first: None to run here (``native`` alone), else the
    exit status of running every chosen class in its own subprocess."""
    names = classes(chosen)
    if names == ["native"]:
        return None
    return run_per_class(argv, names)


def start(parse, argv: list[str] | None):
    """What a benchmark's ``main`` does first: ``(args, None)`` to run here, or ``(args,
    status)`` once every chosen class has run in its own subprocess."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    return args, dispatch(argv, args.cpu_class)
