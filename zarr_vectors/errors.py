"""Exception types.

Every error names what is wrong and where (a store path, a file, a JSON pointer,
a chunk key) so that a failure in a cluster job can be acted on without a debugger.
"""

from __future__ import annotations


class ZarrVectorsError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(ZarrVectorsError, ValueError):
    """The caller's arguments or data are unusable (raised before anything is written)."""


class EncodingError(ZarrVectorsError, ValueError):
    """A cell payload or manifest does not decode (truncated, trailing bytes, bad magic...)."""


class MetadataError(ZarrVectorsError, ValueError):
    """A ``zarr.json`` document is malformed or violates the format.

    ``file`` is the document's key in the store and ``pointer`` a JSON pointer
    (RFC 6901) to the offending member; both may be empty when unknown.
    """

    def __init__(self, message: str, *, file: str = "", pointer: str = "") -> None:
        self.file = file
        self.pointer = pointer
        where = file + (f"#{pointer}" if pointer else "") if file else (f"#{pointer}" if pointer else "")
        super().__init__(f"{where}: {message}" if where else message)
        self.reason = message


class UnsupportedLayoutError(MetadataError):
    """A contract this reader does not know and so refuses rather than guesses: an
    ``object_index`` layout (docs/decisions.md D1), a ``zv_array`` discriminator (§13.2),
    a required capability (D9), an unknown geometry type or the namespaced composite
    layout (D19)."""


class StoreExistsError(ZarrVectorsError, FileExistsError):
    """Creating a store where one exists without ``overwrite=True``."""


class StoreNotFoundError(ZarrVectorsError, FileNotFoundError):
    """Opening a store (or a bucket) that does not exist or cannot be reached."""


class ArrayError(ZarrVectorsError):
    """A request that would corrupt an array family (conflicting policy, wrong arity...)."""


class InternalError(ZarrVectorsError, RuntimeError):
    """A check of this package's own invariants failed: a bug to report, not a problem of the input."""


class ValidationFailedError(ZarrVectorsError):
    """A store that had to pass validation (a job's validate stage) has errors; they are listed."""


class StorageObjectError(ZarrVectorsError, OSError):
    """A storage object that may not be read: a symlink, a FIFO, a device, a directory
    where a file belongs, or a path leading outside the store.

    Stores are data from elsewhere; following a link or opening a special file could read
    outside the store or block forever, so the storage layer refuses before opening.
    ``key`` is the object's key in the store.
    """

    def __init__(self, message: str, *, key: str = "") -> None:
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


class StorageRequestError(ZarrVectorsError, OSError):
    """A request the storage failed after its own retries -- a connection refused, an
    endpoint gone, credentials revoked mid-job.  Not the store's content: the same job can
    finish once the storage answers again (``zv build --resume``)."""


class ResourceLimitError(ZarrVectorsError, ValueError):
    """Decoding or planning would exceed a bound: a cell inflating past its expected size
    or the ``zarr_vectors.limits.*`` ceiling, a declared shape or count too large to honour.
    """


class InconsistentStoreError(ZarrVectorsError, ValueError):
    """The store's parts disagree where a reader relies on them: a vertex index out of
    range, a row count that differs from the one recorded, a cell listed twice.

    The message names the node and the cell; ``validate()`` reports the same defect as a finding.
    """


class PresenceMismatchError(ArrayError):
    """A grid array's ``nonempty_chunks`` does not list exactly the cells on storage.

    Raised by every step that relies on presence lists (the writers' reconcile, the
    pyramid, sharding) before it changes anything (docs/decisions.md D15).
    """


class StageFailedError(ZarrVectorsError):
    """A stage of a job failed; ``stage`` names it, ``step`` the graph it was running (may be
    empty) and ``cause`` (also ``__cause__``) is what it raised -- a task's exception, a
    killed worker, a cancelled future -- so the failure is reported by stage, never bare."""

    def __init__(self, stage: str, cause: BaseException, step: str = "") -> None:
        self.stage, self.step, self.cause = stage, step, cause
        super().__init__(f"stage {stage!r} failed{f' in step {step!r}' if step else ''}: {describe(cause)}")

    def __reduce__(self) -> tuple[type[StageFailedError], tuple[str, BaseException, str]]:
        return (type(self), (self.stage, self.cause, self.step))  # a detached job's error crosses processes


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, for a command's one-line failure report (multi-line
    messages, as distributed's cancellation reports are, and the exception's notes, joined
    with ``; ``)."""
    lines = [*str(exc).splitlines(), *getattr(exc, "__notes__", ())]
    text = "; ".join(line.strip() for line in lines if line.strip())
    return f"{type(exc).__name__}: {text or '(no message)'}"
