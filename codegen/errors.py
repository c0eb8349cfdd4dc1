"""The one exception type users see. The CLI prints its message on one line and exits 2.
Warnings about the user's input (:class:`PockWarning`) are printed on one line too."""

from __future__ import annotations

MAX_MESSAGE = 1000          # characters; longer messages are cut (a huge value is no help)


def brief(value: object, limit: int = 80, quote: bool = True) -> str:
    """``repr(value)`` (``str`` with ``quote=False``) cut to ``limit`` characters: user values
    in messages stay short whatever the file held."""
    text = repr(value) if quote else str(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 epoch``, ``2 epochs`` (``words``: an irregular plural)."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


class PockError(Exception):
    """A problem with the user's input (model, data, spec, board), described in one line."""

    def __init__(self, message: str):
        text = " ".join(str(message).split())
        if len(text) > MAX_MESSAGE:
            text = text[:MAX_MESSAGE - 3] + "..."
        super().__init__(text)


class ModelError(PockError):
    """A model file that cannot be read or is not supported."""


class SpecError(PockError):
    """A training spec, board file or data file that does not fit."""


class PockWarning(UserWarning):
    """Input that works but not as given (e.g. values clipped to the int8 range): the CLI prints
    it on one line (``pockengine: warning: ...``) and goes on."""
