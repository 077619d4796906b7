"""The CPU class and the bf16 probe behind precision ``auto``: the class follows the emulation
variables the way oneDNN and ATen do, and a probe is measured once per machine and remembered."""

import json
import os
from pathlib import Path

import pytest
import torch

from course_utils.core import cpu


@pytest.fixture(autouse=True)
def fresh_memory():
    """Each test starts with no probe answer in this process's memory."""
    cpu._MEMO.clear()
    yield
    cpu._MEMO.clear()


@pytest.fixture
def amx_host(monkeypatch):
    """A host whose own instruction set is AMX, with no emulation variables set."""
    monkeypatch.setattr(cpu, "hardware_class", lambda: "amx")
    for name in (*cpu.ISA_ENV, cpu.ATEN_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    "onednn, aten, expected",
    [
        (None, None, "amx"),
        ("AVX512_CORE_AMX", "avx512", "amx"),
        ("AVX512_CORE_BF16", "avx512", "avx512_bf16"),
        ("AVX512_CORE", "avx512", "avx512"),
        ("AVX512_CORE_VNNI", None, "avx512"),
        ("AVX2", "avx2", "avx2"),
        (None, "avx2", "avx2"),
        ("AVX2", None, "avx2"),
        ("ALL", None, "amx"),
        ("SSE41", None, "other"),
    ],
)
def test_the_class_is_capped_by_the_emulation_variables(amx_host, onednn, aten, expected):
    if onednn:
        amx_host.setenv("ONEDNN_MAX_CPU_ISA", onednn)
    if aten:
        amx_host.setenv("ATEN_CPU_CAPABILITY", aten)
    assert cpu.cpu_class() == expected


def test_a_cap_never_raises_the_class(monkeypatch):
    monkeypatch.setattr(cpu, "hardware_class", lambda: "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert cpu.cpu_class() == "avx2"


def test_the_old_onednn_variable_name_counts_too(amx_host):
    amx_host.setenv("DNNL_MAX_CPU_ISA", "AVX2")
    assert cpu.cpu_class() == "avx2"


def test_a_probe_is_measured_once_and_remembered(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    calls = []

    def fake_measure(width):
        calls.append(width)
        return cpu.BF16Probe(width, fp32_s=0.010, bf16_s=0.004, cpu_class="amx")

    monkeypatch.setattr(cpu, "measure_bf16", fake_measure)
    first = cpu.bf16_probe(64)
    assert first.faster and first.speedup == pytest.approx(2.5)
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "precision auto is bf16 autocast here" in said
    assert cpu.bf16_probe(64) == first and calls == [64]  # from this process's memory
    cpu._MEMO.clear()  # a new process
    assert cpu.bf16_probe(64) == first and calls == [64]  # from the file on disk
    assert capsys.readouterr().err == ""  # and says nothing
    cpu.bf16_probe(128)  # another width is another question
    assert calls == [64, 128]
    stored = json.loads((tmp_path / "bf16_probe.json").read_text())
    assert len(stored) == 2 and all("|64" in k or "|128" in k for k in stored)


def test_the_cache_key_changes_with_the_emulated_class_and_threads(amx_host):
    plain = cpu.probe_key(64)
    amx_host.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert cpu.probe_key(64) != plain
    amx_host.delenv("ONEDNN_MAX_CPU_ISA")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        assert cpu.probe_key(64) != plain
    finally:
        torch.set_num_threads(threads)
    amx_host.setattr(cpu, "PROBE_VERSION", cpu.PROBE_VERSION + 1)  # an older probe's answers
    assert cpu.probe_key(64) != plain


def test_a_corrupt_cache_is_measured_again(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    (tmp_path / "bf16_probe.json").write_text("{not json")
    monkeypatch.setattr(
        cpu, "measure_bf16", lambda w: cpu.BF16Probe(w, 0.010, 0.020, cpu_class="avx2")
    )
    probe = cpu.bf16_probe(64)
    assert not probe.faster and "precision auto is fp32 here" in capsys.readouterr().err


def test_the_real_measurement_is_quick_and_sane():
    probe = cpu.measure_bf16(32, rows=256, rounds=2)
    assert probe.fp32_s > 0 and probe.bf16_s > 0 and probe.width == 32
    assert probe.cpu_class in cpu.CLASSES


def fake_probe(monkeypatch, tmp_path, speedup):
    """Probes that measure bf16 ``speedup`` times as fast as fp32; returns the widths asked."""
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    asked = []

    def measure(width):
        asked.append(width)
        return cpu.BF16Probe(width, fp32_s=0.010, bf16_s=0.010 / speedup, cpu_class="x")

    monkeypatch.setattr(cpu, "measure_bf16", measure)
    return asked


@pytest.mark.parametrize("cls", ["avx2", "avx512"])
def test_auto_is_fp32_without_a_probe_where_bf16_is_emulated(monkeypatch, tmp_path, cls):
    from course_utils.core import device

    asked = fake_probe(monkeypatch, tmp_path, speedup=3.0)  # even a probe saying faster
    monkeypatch.setattr(cpu, "cpu_class", lambda: cls)
    assert not device.prefers_bf16("cpu", width=64) and asked == []
    assert "fp32" in device.precision_reason("cpu") and cls in device.precision_reason("cpu")


@pytest.mark.parametrize("cls", ["amx", "avx512_bf16", "other"])
@pytest.mark.parametrize(
    "speedup, expected", [(2.0, True), (1.3, True), (1.1, False), (0.5, False)]
)
def test_auto_follows_the_probe_where_bf16_may_be_fast(
    monkeypatch, tmp_path, cls, speedup, expected
):
    from course_utils.core import device

    asked = fake_probe(monkeypatch, tmp_path, speedup)
    monkeypatch.setattr(cpu, "cpu_class", lambda: cls)
    assert device.prefers_bf16("cpu", width=64) is expected and asked == [64]
    assert device.prefers_bf16(torch.device("cpu")) is expected and asked == [64, cpu.DEFAULT_WIDTH]
    verdict = "bf16 autocast" if expected else "fp32"
    assert f"precision auto is {verdict} here" in device.precision_reason("cpu", width=64)


def test_auto_on_cuda_is_bf16_where_the_gpu_supports_it(monkeypatch):
    from course_utils.core import device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert device.prefers_bf16("cuda")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert not device.prefers_bf16("cuda")
    assert "fp32 on cuda" in device.precision_reason("cuda")


def test_the_engine_autocasts_as_auto_decides(monkeypatch):
    from torch import nn

    from course_utils.core import device
    from course_utils.engine.training import autocast_for

    for choice, dtype in ((True, torch.bfloat16), (False, torch.float32)):
        monkeypatch.setattr(
            device, "cpu_prefers_bf16", lambda width=None, compiled=False, c=choice: c
        )
        with autocast_for(torch.device("cpu"), "auto"):
            assert nn.Linear(4, 4)(torch.ones(2, 4)).dtype == dtype


def test_a_probe_disturbed_by_other_programs_is_used_but_not_kept(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    steady = iter([0.010, 0.004] * 7)  # warm-up and six rounds, each the same
    monkeypatch.setattr(cpu, "_mlp_step", lambda mlp, x, bf16: next(steady))
    assert not cpu.measure_bf16(16, rows=8, rounds=6).noisy
    rounds = iter([0.010, 0.004] + [0.010, 0.004, 0.030, 0.004] * 3)  # fp32 rounds 3x apart
    monkeypatch.setattr(cpu, "_mlp_step", lambda mlp, x, bf16: next(rounds))
    probe = cpu.measure_bf16(16, rows=8, rounds=6)
    assert probe.noisy and probe.fp32_s == 0.010 and probe.bf16_s == 0.004
    monkeypatch.setattr(cpu, "measure_bf16", lambda width: probe)
    assert cpu.bf16_probe(16).faster  # used in this process
    assert "busy: not kept" in capsys.readouterr().err
    assert not (tmp_path / "bf16_probe.json").exists()  # and measured again by the next one


def test_a_probe_while_other_programs_take_the_cpus_is_not_kept(tmp_path, monkeypatch, capsys):
    # Steady rounds that read bf16 no faster, as every small step waits for a core on a busy
    # machine: the CPUs' clock ticks show others took them, so the answer is not cached.
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path))
    steady = iter([0.100, 0.090] * 7)
    monkeypatch.setattr(cpu, "_mlp_step", lambda mlp, x, bf16: next(steady))
    hz = os.sysconf("SC_CLK_TCK")
    readings = iter([(1000, 2000), (1000 + 2 * hz, 2000 + 2 * hz)])  # 1 s of 2 CPUs, all busy
    monkeypatch.setattr(cpu, "cpu_ticks", lambda: next(readings))
    probe = cpu.measure_bf16(16, rows=8, rounds=6)
    assert probe.noisy and not probe.faster
    monkeypatch.setattr(cpu, "measure_bf16", lambda width: probe)
    cpu.bf16_probe(16)
    assert "busy: not kept" in capsys.readouterr().err
    assert not (tmp_path / "bf16_probe.json").exists()


def test_the_share_of_other_programs_is_the_busy_time_less_ours():
    hz = os.sysconf("SC_CLK_TCK")
    before, after = (0, 0), (3 * hz, 4 * hz)  # 4 CPU-seconds passed, 3 of them busy
    assert cpu.others_share(before, after, own_seconds=1.0) == pytest.approx(0.5)
    assert cpu.others_share(before, after, own_seconds=3.5) == 0.0  # ticks are coarse
    assert cpu.others_share(before, (5, 5), own_seconds=0.0) is None  # too short to tell
    assert cpu.others_share(None, after, own_seconds=0.0) is None  # no /proc/stat
    ticks = cpu.cpu_ticks()  # None off Linux, where the share is not checked
    assert ticks is None or 0 <= ticks[0] <= ticks[1]
    assert ticks is not None or not Path("/proc/stat").exists()
