"""Paths as the experiment tables name them (shared by the summary scripts, which import it from their own folder)."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shown(path):
    """A path as a table names it: relative to the repository when inside it (the scripts pass absolute paths), as
    given otherwise."""
    full = os.path.abspath(path)
    return os.path.relpath(full, REPO) if full.startswith(REPO + os.sep) else path


def arguments(doc, usage, least, most):
    """The script's arguments (sys.argv[1:]): -h or --help prints doc and usage and exits 0; another option, or a
    count outside [least, most], prints usage and exits 2 (before the script reads or writes anything)."""
    args = sys.argv[1:]
    if any(a in ("-h", "--help") for a in args):
        print((doc or "").strip() + "\n\nUsage: " + usage)
        sys.exit(0)
    bad = [a for a in args if a.startswith("-") and a != "-"]
    if bad or not least <= len(args) <= most:
        what = f"unknown option {bad[0]}" if bad else f"expected {least}..{most} arguments, got {len(args)}"
        sys.stderr.write(f"{os.path.basename(sys.argv[0])}: {what}\nUsage: {usage}\n")
        sys.exit(2)
    return args
