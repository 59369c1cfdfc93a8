"""What the service refuses, in the domain's words: the exceptions the store, the loop's stories
and the model calls raise when a request cannot be answered as asked. They carry no HTTP: the
API maps each to its status in one place (:mod:`service.errors`), so the store and the workers
import nothing of the web framework."""

from __future__ import annotations

import contextlib


class Refusal(Exception):
    """A request refused: ``detail`` says why, in words for the caller; ``retry_after``, where
    set, the seconds after which asking again may succeed."""

    def __init__(self, detail: str, retry_after: int | None = None):
        super().__init__(detail)
        self.detail = detail
        self.retry_after = retry_after


class NotFound(Refusal):
    """No such campaign, ticket, model or plot."""


class Conflict(Refusal):
    """The campaign's state does not allow it now (a ticket ended, a label given twice)."""


class Gone(Refusal):
    """The campaign is done."""


class Unprocessable(Refusal):
    """Well-formed, but not for this campaign (a point outside its box, of another dimension)."""


class JobFailed(Refusal):
    """A model job failed on the worker."""


class TooLarge(JobFailed):
    """A short job ran out of the memory a job may use (``job_memory_mb``)."""


class TooMany(Refusal):
    """A campaign has as many model calls running as it may (``limit_model_calls``)."""

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail, retry_after)


class Busy(Refusal):
    """No worker took a model job in time: nothing is wrong with the request; ask again."""

    def __init__(self, detail: str, retry_after: int):
        super().__init__(detail, retry_after)


@contextlib.contextmanager
def unprocessable_values():
    """A value that a check of the shared vocabulary refuses (``ValueError``: a point that does
    not fit the inputs, a label that does not fit the outputs), refused as
    :class:`Unprocessable` with its words."""
    try:
        yield
    except ValueError as error:
        raise Unprocessable(str(error)) from None
