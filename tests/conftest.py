"""Shared test setup: fixture notebooks are inputs to tests, not lessons for nbval to run."""

collect_ignore_glob = ["fixtures/*", "fixtures/**/*"]
