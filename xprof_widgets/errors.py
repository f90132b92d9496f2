"""The one exception users see for bad profiles."""


class ProfileError(Exception):
    """A profile could not be read: the message names the file and what is wrong."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
