"""The corpus audit's former import path: the audit is :mod:`course_utils.projects.corpus.audit`
now, and this name is the same module object, so older imports keep working."""

import sys

from .corpus import audit

sys.modules[__name__] = audit
