"""Paths as the experiment tables name them (shared by the summary scripts, which import it from their own folder)."""
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shown(path):
    """A path as a table names it: relative to the repository when inside it (the scripts pass absolute paths), as
    given otherwise."""
    full = os.path.abspath(path)
    return os.path.relpath(full, REPO) if full.startswith(REPO + os.sep) else path
