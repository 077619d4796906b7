"""Instructor and maintainer tools: lab generation, publishing notebooks, the
environment doctor and the command line. Nothing below this layer imports from it."""
