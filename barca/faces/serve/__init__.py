"""``barca serve``: one long-lived process per project answering an HTTP JSON API, serving the
web UI (``ui/``) and firing schedules (``scheduler``). A face: it renders what ``barca.api`` and
``barca.queries`` give, and runs each accepted run as a ``python -m barca get|run --json`` child
process, so a served run's row and JSON outcome are exactly the CLI's.

Nothing here is imported by the CLI unless it serves: starlette, uvicorn and croniter stay out of
every other command's start-up.

The scheduler's interface (``barca.faces.serve.scheduler``)::

    class Scheduler:
        def __init__(self, root: Path, nodes: list[dict],   # `barca list --json` node objects
                     tz: tzinfo,
                     submit: Callable[[dict], str | None],  # the queue's entry point
                     in_flight: Callable[[str], str | None],  # a run of this node pending/running
                     enabled: bool, db_path: Path): ...
        def start(self) -> None            # a background thread
        def stop(self) -> None
        def reload(self, nodes: list[dict]) -> None
        def entries(self) -> list[dict]    # GET /schedule
        def pause(self, ident: str, until: datetime | None) -> dict   # KeyError if unknown
        def resume(self, ident: str) -> dict                          # KeyError if unknown
        def run_finished(self, schedule_id: str, ok: bool) -> None

``submit(body)`` takes a ``POST /runs`` body plus ``triggered_by="schedule"``, ``scheduled_at``
(RFC 3339 UTC) and ``schedule_id``, and returns the run id (None when refused).
``in_flight(node_id)`` is the id of a run of that node that is pending or running, a CLI run on the
same ``.barca/`` included (a ``runs`` row with status ``running`` and a live pid). Both are
methods of the server's queue object (``barca.faces.serve.queue.Queue``); the server calls
``run_finished`` when a run it started for a schedule ends.
"""
