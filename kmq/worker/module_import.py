"""Importing the module ``kmq worker MODULE`` names, with its failures as one line.

A module with a syntax error, or whose own imports fail, printed a whole Python traceback
(or, for a failing import inside it, "cannot import module" with a hint to fix its name,
which was right). Now each is a :class:`ConfigError` naming the module, the file and line,
and the problem, as Python's own summary does (``jobs.py:3: SyntaxError: invalid syntax``).
"""

from __future__ import annotations

import importlib
import os
import traceback
from types import ModuleType

from kmq.errors import ConfigError, KmqError

SHOWN_SOURCE_CHARS = 80  # of the line a syntax error points at


def import_module(name: str, hint: str) -> ModuleType:
    """Import module ``name``; ``hint`` says how to name it, for a module that is not there."""
    try:
        return importlib.import_module(name)
    except SyntaxError as exc:  # IndentationError and TabError too
        source = (exc.text or "").strip()
        shown = f" (`{source[:SHOWN_SOURCE_CHARS]}`)" if source else ""
        raise ConfigError(f"module {name!r} does not compile: {_place(exc.filename, exc.lineno)}: "
                          f"{type(exc).__name__}: {exc.msg}{shown}; fix it and start again") from exc
    except ImportError as exc:
        if _names_the_module(exc, name):
            raise ConfigError(f"cannot import module {name!r} ({exc}): {hint}") from exc
        raise ConfigError(f"module {name!r} was found but an import in it failed: {_raised_at(exc)}: "
                          f"{type(exc).__name__}: {exc}; install what it imports or fix the import") from exc
    except KmqError:
        raise  # a @kmq.handler's own check (it names the argument)
    except Exception as exc:
        raise ConfigError(f"module {name!r} raised while it was imported: {_raised_at(exc)}: "
                          f"{type(exc).__name__}: {exc}") from exc


def _names_the_module(exc: ImportError, name: str) -> bool:
    """Whether ``exc`` says ``name`` itself (or a package it is in) is not there, not
    something the module imports."""
    missing = getattr(exc, "name", None)
    return isinstance(exc, ModuleNotFoundError) and missing is not None and (
        name == missing or name.startswith(missing + "."))


def _raised_at(exc: BaseException) -> str:
    """file:line of the innermost frame outside importlib and this module (the user's line)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith("<frozen ") and f.filename != __file__]
    return _place(frames[-1].filename, frames[-1].lineno) if frames else "(unknown place)"


def _place(filename: str | None, lineno: int | None) -> str:
    """``file:line``, the file relative to the working directory when it is in it."""
    path = filename or "<unknown>"
    try:
        rel = os.path.relpath(path)
        path = path if rel.startswith("..") else rel
    except ValueError:  # another drive (Windows)
        pass
    return f"{path}:{lineno}" if lineno else path
