"""The course's kernels wait without spinning: a real kernel of an environment with the course's
kernel config runs with OMP_WAIT_POLICY=PASSIVE, and torch's libgomp takes it (spin count 0)."""

import json
import subprocess
import sys
import sysconfig
import textwrap

import pytest

from course_utils.tools import kernel_env


def test_install_adds_the_block_once_and_keeps_the_files_other_settings(tmp_path):
    path = kernel_env.config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("c.IPKernelApp.matplotlib = 'inline'", encoding="utf-8")
    assert kernel_env.install(tmp_path) == path
    kernel_env.install(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("c.IPKernelApp.matplotlib = 'inline'\n")
    assert text.count(kernel_env.MARK) == 1
    assert "PASSIVE" in kernel_env.policy_line(tmp_path)


def _environment(tmp_path):
    """A fresh virtual environment that sees this one's packages (torch, ipykernel)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    ask = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    purelib = subprocess.run([python, "-c", ask], capture_output=True, text=True, check=True)
    here = sysconfig.get_paths()["purelib"]
    (tmp_path / "venv.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    (tmp_path / "venv.pth").rename(f"{purelib.stdout.strip()}/course_test.pth")
    return venv, python


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libgomp is Linux's OpenMP")
@pytest.mark.parametrize("installed", [True, False], ids=["course-config", "no-config"])
def test_a_kernel_of_the_environment_waits_passively(tmp_path, monkeypatch, installed):
    """The kernel is started as JupyterLab starts one (jupyter_client, a kernelspec) with no
    OMP_WAIT_POLICY of its own (CI sets one: removed here); libgomp prints its settings."""
    from jupyter_client.manager import KernelManager

    venv, python = _environment(tmp_path)
    if installed:
        kernel_env.install(venv)
    spec = tmp_path / "share" / "jupyter" / "kernels" / "coursetest"
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "language": "python",
                                                  "display_name": "t"}))  # fmt: skip
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setenv("OMP_DISPLAY_ENV", "VERBOSE")  # libgomp prints its settings at load
    stderr = tmp_path / "kernel.err"
    km = KernelManager(kernel_name="coursetest")
    with stderr.open("w") as err:
        km.start_kernel(stderr=err)
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        code = textwrap.dedent("""\
            import os, sys
            import torch
            print(sys.prefix, os.environ.get("OMP_WAIT_POLICY"))""")
        printed = []
        kc.execute_interactive(code, timeout=120, output_hook=lambda m: printed.append(
            m["content"].get("text", "")))  # fmt: skip
        kc.stop_channels()
    finally:
        km.shutdown_kernel(now=True)
    prefix, policy = "".join(printed).split()
    assert prefix == str(venv)
    spin = [line.split("=")[1].strip(" '") for line in stderr.read_text().splitlines()
            if "GOMP_SPINCOUNT" in line]  # fmt: skip
    if installed:
        assert (policy, spin) == ("PASSIVE", ["0"])
    else:
        assert (policy, spin) == ("None", ["300000"])  # libgomp's default: spin, then sleep
