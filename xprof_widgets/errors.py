"""The one exception users see for bad profiles."""

import contextlib
from collections.abc import Iterator


class ProfileError(Exception):
    """A profile could not be read: the message names the file and what is wrong."""

    def __init__(self, path: object, problem: str, host: str | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        #: The host of a run this file was left out of (the message starts with it), or None.
        self.host = host
        lead = "" if host is None else f"host {host} was left out: "
        super().__init__(f"{lead}{self.path}: {problem}")

    def __reduce__(self) -> tuple[type, tuple[str, str, str | None]]:
        # Whole across processes (a pool's or Dask's worker raises it): the default would
        # call ProfileError(message) with one argument.
        return (ProfileError, (self.path, self.problem, self.host))


NO_SUCH_FILE = {FileNotFoundError: "no such file"}


@contextlib.contextmanager
def os_errors(path: object, action: str = "read", problems: dict = NO_SUCH_FILE) -> Iterator:
    """OSErrors raised inside become a ProfileError naming `path`: the problem `problems`
    gives for the error's kind (an OSError subclass -> words), else "cannot be <action>
    (the system's reason)"."""
    try:
        yield
    except OSError as e:
        for kind, problem in problems.items():
            if isinstance(e, kind):
                raise ProfileError(path, problem) from None
        raise ProfileError(path, f"cannot be {action} ({getattr(e, 'strerror', None) or e})") from None
