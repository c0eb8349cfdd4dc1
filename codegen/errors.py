"""The one exception type users see. The CLI prints its message on one line and exits 2."""


class PockError(Exception):
    """A problem with the user's input (model, data, spec, board), described in one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class ModelError(PockError):
    """A model file that cannot be read or is not supported."""


class SpecError(PockError):
    """A training spec, board file or data file that does not fit."""
