"""The one exception users see for bad profiles."""

import contextlib
from collections.abc import Iterator


class ProfileError(Exception):
    """A profile could not be read: the message names the file and what is wrong."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


@contextlib.contextmanager
def os_errors(path: object, action: str = "read", missing: str = "no such file", wrong_kind: str = "") -> Iterator:
    """OSErrors raised inside become a ProfileError naming `path`: `missing` when it is
    not there, `wrong_kind` (if given) when it is a folder where a file was wanted or the
    other way round, else "cannot be <action> (the system's reason)"."""
    try:
        yield
    except FileNotFoundError:
        raise ProfileError(path, missing) from None
    except OSError as e:
        if wrong_kind and isinstance(e, (IsADirectoryError, NotADirectoryError)):
            raise ProfileError(path, wrong_kind) from None
        raise ProfileError(path, f"cannot be {action} ({getattr(e, 'strerror', None) or e})") from None
