"""studybench: the StudyBench evaluation protocol, verifier and test-set tooling.

Run as ``python -m studybench`` (or ``python -m studybench.cli``), Python puts the working directory
first on the import path, so a ``secrets.py``, ``json.py`` or ``sympy.py`` lying there would shadow
the real module in this process. The package drops that entry before anything else is imported
(:func:`_drop_working_directory`); what Python itself imports before the package runs (``runpy``
and its imports) is out of its reach: ``python -P -m studybench`` or the ``studybench`` command
avoid even that.
"""

import sys as _sys

__version__ = "0.1.0"


def _module_run_by_m(orig_argv: list[str]) -> str | None:
    """The module named by ``-m`` on the interpreter's command line (``python -m X`` / ``-mX``), if any."""
    for i, arg in enumerate(orig_argv[1:], 1):
        if arg == "-m":
            return orig_argv[i + 1] if i + 1 < len(orig_argv) else None
        if arg.startswith("-m"):
            return arg[2:]
        if arg == "-c" or not arg.startswith("-"):
            return None  # a script or -c: the rest are its arguments
    return None


def _drop_working_directory() -> None:
    """Under ``python -m studybench[.cli]``: remove the working directory that ``-m`` put first on ``sys.path``.

    Only while ``-m`` is locating this package (``sys.argv[0] == "-m"``) and only when the module run is
    ``studybench`` or one of its modules: importing studybench from another program changes nothing.
    """
    try:
        if _sys.flags.safe_path or _sys.argv[:1] != ["-m"]:
            return
        target = _module_run_by_m(list(getattr(_sys, "orig_argv", [])))
        if target is None or target.partition(".")[0] != __name__:
            return
        import os

        first = _sys.path[0] if _sys.path else None
        if first == "" or (isinstance(first, str) and os.path.realpath(first) == os.path.realpath(os.getcwd())):
            del _sys.path[0]
    except Exception:  # noqa: BLE001 - never stop the package from loading (e.g. a removed working directory)
        pass


_drop_working_directory()
