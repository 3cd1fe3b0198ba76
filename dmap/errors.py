"""Errors that dmap reports to users as one clear line.

Every problem a user can cause or fix (bad input, a damaged index, no device,
no scheduler) is raised as a :class:`DmapError` subclass whose message says
what is wrong and how to fix it.  The CLI prints the message and exits
non-zero; anything else escaping is a bug in dmap.
"""

from __future__ import annotations


class DmapError(Exception):
    """Base class of all user-facing dmap errors."""


class InputFormatError(DmapError):
    """A FASTA/FASTQ (or BAM) file is missing, empty, malformed or has unknown symbols."""


class UnknownSymbolError(InputFormatError):
    """A read holds a symbol outside the index alphabet.

    Raised where the read names are not at hand (the exact search kernel
    checks symbols on the device); :meth:`naming` gives the user's message.
    """

    def __init__(self, read: int, symbol: str):
        super().__init__(read, symbol)  # these args make the exception picklable
        self.read, self.symbol = read, symbol

    def __str__(self) -> str:
        return f"read number {self.read + 1} of a chunk contains the symbol {self.symbol!r}, which the index lacks"

    def naming(self, names: list[str], alphabet: str) -> InputFormatError:
        """The same error, naming the read (``names`` of its chunk) and the alphabet."""
        return InputFormatError(f"read {names[self.read]!r} contains the symbol {self.symbol!r}, which is not in "
                                f"the index's {alphabet} alphabet")


class IndexFormatError(DmapError):
    """An index path is not a dmap index, is damaged, or does not fit the reads."""


class DeviceError(DmapError):
    """No usable OpenCL device, or a kernel could not be built or run."""


class OutputError(DmapError):
    """The output file cannot be written (disk full, permissions)."""

    errno: int | None = None  # the OSError's, when one caused it

    @classmethod
    def writing(cls, path: str, error: OSError, after: str = "no output was written") -> OutputError:
        """The error for ``error`` raised while writing ``path``; ``after`` says what is left
        (:attr:`dmap.io.output.Output.after_failure`)."""
        e = cls(f"cannot write {path!r}: {error.strerror or error}; {after}")
        e.errno = error.errno
        return e


class ClusterError(DmapError):
    """The Dask scheduler cannot be reached or the cluster lost its workers."""



class Interrupted(KeyboardInterrupt):
    """A termination signal (SIGTERM, SIGHUP, SIGUSR1, ...: ``dmap.cli.TERMINATION_SIGNALS``)
    turned into an exception, so that a run cleans up as it does on Ctrl-C (SIGINT):
    temporary files are removed."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


class DmapWarning(UserWarning):
    """Something that maps, but probably not as the user meant (DNA reads against a
    protein index).  The ``dmap`` command prints it as one ``dmap: warning:`` line."""
