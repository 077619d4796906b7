# Two entry points for newcomers: `make course` and `make test` (see README).
# Any Python 3.11 to 3.13: `make course PYTHON=python3.12` picks one (README).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup instructor dev course test compat lint publish-labs site check-python vm-test

# Before anything is installed: a Python outside 3.11-3.13 is refused in one line naming the fix,
# and a $(VENV) made by another Python is removed, to be made again below with the one named
# (course_utils/tools/python_check.py; a $(VENV) made by a supported Python is kept unless
# PYTHON= names another); a PYTHON that does not start is named in one line too. Every entry
# point below lists it first.
check-python:
	@if $(PYTHON) -c '' >/dev/null 2>&1; then \
		$(PYTHON) course_utils/tools/python_check.py --venv $(VENV) --python $(PYTHON) \
			$(if $(filter command line environment,$(origin PYTHON)),--chosen) \
			--command "make $(or $(firstword $(MAKECMDGOALS)),setup)"; \
	else \
		for python in python3 python; do if $$python -c '' >/dev/null 2>&1; then \
			exec $$python course_utils/tools/python_check.py --missing --python $(PYTHON) \
				--command "make $(or $(firstword $(MAKECMDGOALS)),setup)"; fi; done; \
		echo "setup: $(PYTHON) does not run on this machine, nor does python3: install Python 3.12 (python.org, or your system's python3.12 package)" >&2; \
		exit 1; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The student's install. The right torch first (CPU-only without an NVIDIA GPU; an installed
# torch is kept), then the course; re-run only when the requirements change. pip runs quietly
# (its warnings and errors still show): one line per step says what was done. The course's
# kernels wait without spinning (course_utils/tools/kernel_env.py: a busy laptop stays fast).
PIP_QUIET := -m pip install -q --disable-pip-version-check
$(VENV)/.installed: $(BIN)/python requirements.txt pyproject.toml
	@$(BIN)/python course_utils/tools/torch_setup.py
	@$(BIN)/python $(PIP_QUIET) -r requirements.txt
	@echo "setup: course packages ready ($$($(BIN)/python -m pip list --format=freeze 2>/dev/null | wc -l) packages in $(VENV))"
	@$(BIN)/python -m course_utils.tools.kernel_env
	@-$(BIN)/python -m course_utils setup-git
	@touch $@

# Instructors: nbgrader for generating and grading labs.
$(VENV)/.installed-instructor: $(VENV)/.installed
	@$(BIN)/python $(PIP_QUIET) -e '.[instructor]'
	@echo "setup: instructor tools ready (nbgrader, the sandbox)"
	@touch $@

# Maintainers: the instructor tools plus lint and the benchmarks' reference implementation.
$(VENV)/.installed-dev: $(VENV)/.installed-instructor
	@$(BIN)/python $(PIP_QUIET) -e '.[instructor,dev]'
	@echo "setup: maintainer tools ready (lint, benchmarks, build)"
	@touch $@

# The website's builder and its browser test's client.
$(VENV)/.installed-site: $(VENV)/.installed
	@$(BIN)/python $(PIP_QUIET) -e '.[site]'
	@echo "setup: website tools ready (Sphinx, Selenium)"
	@touch $@

setup: check-python $(VENV)/.installed
instructor: check-python $(VENV)/.installed-instructor
dev: check-python $(VENV)/.installed-dev

# JupyterLab on the whole checkout (lessons and labs), at lesson 01, with the course's JupyterLab
# settings (widget state saved with the notebook). The lessons are not trusted, so their stored
# widgets show as static pictures until their cell runs (course_utils/tools/open_course.py, which
# `gpt-course open DIR` runs on a student's copy too).
course: setup
	$(BIN)/python -m course_utils doctor || true
	$(BIN)/python -m course_utils open .

# The unit tests and every lesson and solution under nbval, TEST_WORKERS files at a time
# (pytest-xdist; a notebook's cells stay together, in order, in one kernel), the slowest files
# handed out first, each worker with torch threads = CPUs / workers (lessons 11 and 12: every CPU,
# as a student runs them) and OMP_WAIT_POLICY=PASSIVE (conftest.py). PYTEST_ARGS adds options
# (`make test PYTEST_ARGS="-k grading"`).
TEST_WORKERS ?= 2
test: check-python $(VENV)/.installed-dev $(VENV)/.installed-site
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The grader's limiter in a Debian 12 guest under KVM (systemd, cgroup v2 only), as root and as a
# logged-in user (maintainers, after changing course_utils/grading/limiter.py; root, qemu and
# debootstrap; 5 minutes to build the guest image, cached in .vm/, then the boot and the two
# passes: minutes with KVM, far longer under qemu's emulator): tests/test_vm.py.
vm-test: $(VENV)/.installed-dev
	COURSE_VM_TEST=1 $(BIN)/python -m pytest -p no:xdist -v -s tests/test_vm.py $(PYTEST_ARGS)

# The torch range the course allows, end to end (maintainers, before changing it; long, and
# several GB of downloads): the oldest torch, the newest one pip finds, and Python 3.13, each in
# a fresh environment under .compat/ running the unit tests and nbval (.ci/torch_range).
compat:
	.ci/torch_range

# The course as a static website in site/, from the committed notebooks (nothing is re-run).
site: setup $(VENV)/.installed-site
	$(BIN)/python -m course_utils site build --out site

lint: dev
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

publish-labs: instructor
	$(BIN)/python -m course_utils labs build
