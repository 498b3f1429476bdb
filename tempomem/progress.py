"""Progress bars for long loads (tqdm; ``tqdm.auto`` widgets in Jupyter), behind one callback.

Loads report progress through a plain callback, ``progress(stage, rows_done)`` (the
:data:`Progress` type :func:`tempomem.backfill.backfill` calls): ``"read"`` when the input is
bound, ``"checked"`` with the rows read once every row is checked, then ``"write"`` with the
revision rows written so far. :class:`Bars` is such a callback drawing tqdm bars, and
:func:`reporter` picks one for a caller:

* ``None`` (the default): bars only for loads of at least :data:`MIN_ROWS` rows, and only where
  someone watches: in a Jupyter kernel, or when stderr is a terminal (never in a pipe, a log
  file or CI);
* ``False``: nothing; ``True``: bars for any size, wherever stderr goes;
* a callable: used as it is (closing it is the caller's business).

Inside :func:`quiet` (the CLI's ``--json``) the default draws nothing either.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, Any

#: The callback loads report to: ``progress(stage, rows_done)``.
Progress = Callable[[str, int], None]
ProgressLike = Progress | bool | None

#: Smaller loads finish in a few seconds: a bar would only flicker.
MIN_ROWS = 1_000_000

_STAGES = {"write": "writing revisions", "embed": "embedding texts"}
_QUIET: ContextVar[bool] = ContextVar("tempomem_quiet", default=False)


@contextmanager
def quiet() -> Iterator[None]:
    """Within it, loads left to the default (``progress=None``) draw no bar."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython's ZMQ shell); never imports IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return type(shell).__name__ == "ZMQInteractiveShell"


def watched() -> bool:
    """Whether a person can see progress: a Jupyter kernel, or stderr on a terminal."""
    if in_notebook():
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


def _tqdm(**kwargs: Any) -> Any:
    """A tqdm bar: the notebook widget in Jupyter (``tqdm.auto``), text on a terminal."""
    if in_notebook() and "file" not in kwargs:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(**kwargs)


class Bars:
    """A :data:`Progress` callback drawing one tqdm bar per long stage.

    A bar opens when a stage first reports (a ``"write"`` bar's total is the rows checked)
    and only when the load has at least ``min_rows`` rows; :meth:`close` ends the open bar.
    ``file`` is where text bars go (stderr by default).

    >>> import io
    >>> text = io.StringIO()
    >>> with Bars(min_rows=1, file=text) as bars:
    ...     report = mem.backfill([{"subject": "svc", "predicate": "owner", "object": "ana",
    ...                             "recorded_at": "2026-03-01"}], progress=bars)
    >>> bars.total, text.getvalue().splitlines()[-1]  # doctest: +ELLIPSIS
    (1, '...writing revisions: 100%|##########| 1.00/1.00 [...]')
    """

    def __init__(self, *, min_rows: int | None = None, file: IO[str] | None = None) -> None:
        self.min_rows = MIN_ROWS if min_rows is None else min_rows
        self.file = file
        self.total = 0
        self._stage: str | None = None
        self._bar: Any = None

    def __call__(self, stage: str, done: int) -> None:
        if stage == "read":
            return
        if stage == "checked":
            self.total = done
            return
        if self.total < self.min_rows:
            return
        if stage != self._stage:
            self.close()
            self._stage = stage
            extra = {} if self.file is None else {"file": self.file}
            self._bar = _tqdm(total=self.total, desc=_STAGES.get(stage, stage), unit=" rows", unit_scale=True,
                              dynamic_ncols=True, **extra)
        bar = self._bar
        if done > bar.total:  # a retracted row writes two revisions: the total grows with them
            bar.total = done
        bar.update(done - bar.n)

    def close(self) -> None:
        """End the open bar (its last line stays on screen)."""
        if self._bar is not None:
            self._bar.close()
        self._bar, self._stage = None, None

    def __enter__(self) -> Bars:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _silent(stage: str, done: int) -> None:
    """The callback of a load nobody watches."""


@contextmanager
def reporter(progress: ProgressLike = None, *, min_rows: int | None = None) -> Iterator[Progress]:
    """The :data:`Progress` callback for ``progress`` (see the module doc), closed on exit.

    >>> seen = []
    >>> with reporter(lambda stage, done: seen.append((stage, done))) as notify:  # a callable, as it is
    ...     report = mem.backfill([{"subject": "svc", "predicate": "owner", "object": "ana",
    ...                             "recorded_at": "2026-03-01"}], progress=notify)
    >>> seen
    [('read', 0), ('checked', 1), ('write', 1)]
    """
    if callable(progress):
        yield progress
        return
    if progress is False or (progress is None and (_QUIET.get() or not watched())):
        yield _silent
        return
    threshold = MIN_ROWS if min_rows is None else min_rows
    with Bars(min_rows=1 if progress is True else threshold) as bars:
        yield bars


def batches(total: int, size: int, progress: ProgressLike = None, stage: str = "embed") -> Iterator[tuple[int, int]]:
    """``(start, stop)`` slices of ``range(total)`` in steps of ``size``, reported to ``progress``
    as ``stage`` (the rows done after each slice); for work done in Python batches."""
    with reporter(progress) as notify:
        notify("checked", total)
        for start in range(0, total, size):
            stop = min(start + size, total)
            yield start, stop
            notify(stage, stop)


@contextmanager
def statement(con: Any, desc: str, rows: int, progress: ProgressLike = None, *,
              every: float = 0.5) -> Iterator[None]:
    """A bar for one long DuckDB statement run on ``con`` inside the ``with`` (a fold, say).

    DuckDB tracks the statement's progress (``query_progress()``, in percent) once the
    connection has ``enable_progress_bar`` on and ``enable_progress_bar_print`` off (so it
    prints nothing itself); a thread reads it every ``every`` seconds and draws it. Nothing
    happens for fewer than :data:`MIN_ROWS` rows or when nobody watches.
    """
    with reporter(progress) as notify:
        notify("checked", rows)
        if notify is _silent or (isinstance(notify, Bars) and rows < notify.min_rows):
            yield
            return
        con.execute("SET enable_progress_bar = true")
        con.execute("SET enable_progress_bar_print = false")
        stop = threading.Event()

        def poll() -> None:
            while not stop.wait(every):
                share = con.query_progress()
                if share >= 0:
                    notify(desc, int(rows * min(share, 100.0) / 100))

        thread = threading.Thread(target=poll, name="tempomem-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        notify(desc, rows)
