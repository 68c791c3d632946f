"""Whether a directory path can be written, found without making anything that stays.

The tracker's ``KMQ_DATA_DIR`` and ``kmq dev --data-dir`` are made when the worker starts;
one that cannot be (a file on the way, no permission, /proc) failed there with a
traceback. Checked first, each is one error naming the setting and the fix. Written, not
asked (``os.access``): root may "write" to /proc, where nothing can be made.
"""

from __future__ import annotations

import tempfile
from pathlib import Path


def problem(path: str) -> str | None:
    """What stops ``path`` from being used as a directory this process writes (None: nothing):
    ``"is not writable (...)"`` for an existing directory, else ``"cannot be created (...)"``."""
    target = Path(path)
    if target.is_dir():
        return _unwritable(target, "is not writable")
    if target.exists():
        return "cannot be created (a file of that name is there)"
    ancestor = target.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"cannot be created ({ancestor} is a file)"
    return _unwritable(ancestor, "cannot be created")


def _unwritable(directory: Path, says: str) -> str | None:
    try:
        tempfile.TemporaryFile(dir=directory).close()
    except OSError as exc:
        return f"{says} ({exc.strerror or exc})"
    return None
