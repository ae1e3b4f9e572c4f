"""Set or remove the labels of a run directory after the fact (``studybench label``).

Labels are free ``key: value`` strings in the manifest (:attr:`studybench.store.Manifest.labels`),
e.g. ``method=GEPA``, ``layer=Instructions with Answer``, ``base=Qwen3-8B``: reports and exports
carry them, so that runs can be grouped without parsing their directory names.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from studybench.store.manifest import check_labels
from studybench.store.run import RunStore

__all__ = ["set_labels"]


def set_labels(run_dir: Path | str | RunStore, labels: Mapping[str, str | None]) -> dict[str, str]:
    """Set (or, with ``None``, remove) labels of a run and rewrite its manifest atomically.

    The run directory's writer lock (:meth:`RunStore.lock`) is held while the manifest is read and
    written, so a running ``eval`` or ``judge`` is never overwritten: the call is refused instead.

    Args:
        run_dir: the run directory (or its :class:`RunStore`).
        labels: key -> new value; ``None`` removes the key (removing an absent key is not an error).

    Returns:
        The run's labels afterwards.

    Raises:
        FileNotFoundError: not a run directory.
        ValueError: an invalid label (the message names it), or an unreadable manifest.
        studybench.store.RunDirInUseError: another process is writing the run directory.
        OSError: the manifest cannot be written.
    """
    store = run_dir if isinstance(run_dir, RunStore) else RunStore(Path(run_dir))
    if not store.exists():  # before the lock, which would create the directory
        raise FileNotFoundError(f"{store.root}: not a run directory (no {RunStore.MANIFEST})")
    check_labels({k: v for k, v in labels.items() if v is not None})
    for key in labels:
        if not isinstance(key, str) or not key:
            raise ValueError(f"label {key!r}: a key must be a non-empty string")
    with store.lock():
        man = store.read_manifest()
        new = dict(man.labels)
        for key, value in labels.items():
            if value is None:
                new.pop(key, None)
            else:
                new[key] = value
        new = check_labels(new)  # e.g. too many labels in all
        if new != man.labels:
            store.write_manifest(man.model_copy(update={"labels": new}))
    return new
