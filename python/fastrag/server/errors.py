"""Errors of the HTTP API: what went wrong, as an HTTP status and a one-line message."""

from __future__ import annotations

from fastrag.errors import UserError


class ApiError(UserError):
    """A request that cannot be served, with the HTTP status to answer it with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BodyTooLarge(ApiError):
    """The request body went past the size bound (raised while it is being received)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body too large: at most {limit} bytes")


class BodyTooSlow(ApiError):
    """The request body did not arrive within the time bound (raised while it is being received)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"request body not received within {seconds:g} s")


def status_of(error: UserError) -> int:
    """The HTTP status of a user error: its own for an :class:`ApiError`, else 400 (bad request)."""
    return error.status if isinstance(error, ApiError) else 400
