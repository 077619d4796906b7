"""The benchmarks' --cpu-class: each class runs in its own process with the variables that make
this host behave like it, and a class the host cannot emulate is refused."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.core import cpu

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def classes_module(monkeypatch):
    spec = importlib.util.spec_from_file_location("cpu_classes", ROOT / "benchmarks/cpu_classes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(cpu, "hardware_class", lambda: "avx512_bf16")
    return module


def test_all_means_every_class_up_to_the_hosts_own(classes_module):
    assert classes_module.classes("all") == ["avx512_bf16", "avx512", "avx2"]
    assert classes_module.classes("native,avx2") == ["native", "avx2"]
    with pytest.raises(SystemExit, match="can emulate avx512_bf16, avx512, avx2, not amx"):
        classes_module.classes("amx")
    with pytest.raises(SystemExit, match="unknown CPU class 'avx9'"):
        classes_module.classes("avx9")


def test_each_class_runs_in_a_child_with_its_variables(classes_module, monkeypatch, capsys):
    calls = []

    def call(argv, env):
        calls.append((argv, env))
        return 1 if env.get("ONEDNN_MAX_CPU_ISA") == "AVX2" else 0

    monkeypatch.setattr(classes_module.subprocess, "call", call)
    monkeypatch.setattr(sys, "argv", ["bench.py"])
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE")  # the caller's own setting
    argv = ["--rounds", "2", "--cpu-class", "native,avx2"]
    assert classes_module.dispatch(argv, "native,avx2") == 1  # the worst child's status
    (native_argv, native_env), (avx2_argv, avx2_env) = calls
    assert (
        native_argv[1:] == avx2_argv[1:] == ["bench.py", "--rounds", "2", "--cpu-class", "native"]
    )
    assert "ONEDNN_MAX_CPU_ISA" not in native_env and "ATEN_CPU_CAPABILITY" not in native_env
    assert avx2_env["ONEDNN_MAX_CPU_ISA"] == "AVX2" and avx2_env["ATEN_CPU_CAPABILITY"] == "avx2"
    headings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("## ")]
    assert len(headings) == 2 and "emulated on an avx512_bf16 host" in headings[1]
    assert classes_module.dispatch(["--cpu-class=native"], "native") is None  # runs here


def test_a_child_with_the_avx2_variables_is_an_avx2_cpu():
    env_line = "from course_utils.core import cpu; print(cpu.cpu_class())"
    out = subprocess.run(
        [sys.executable, "-c", env_line],
        env={
            **__import__("os").environ,
            "ONEDNN_MAX_CPU_ISA": "AVX2",
            "ATEN_CPU_CAPABILITY": "avx2",
        },
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.strip()
    assert out == "avx2"
