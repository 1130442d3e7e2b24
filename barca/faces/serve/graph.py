"""``GET /graph.svg``: the picture ``barca graph`` draws (``barca.queries.picture``), with the
nodes a run works on now drawn as running -- the web UI's graph, polled while runs go on."""
from __future__ import annotations

import hashlib
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def svg(server: Any, call: Any, files: tuple[str, ...]) -> str:
    from barca import api
    from barca.faces.serve import runs
    from barca.queries.picture import DagPicture
    report = call(api.status, None, *files, settings=server.settings)
    working = runs.working_on(server)  # node id or name -> run id
    running = {r.id: "running" for r in report.rows if r.id in working or r.name in working}
    return DagPicture.from_status(report, states=running).svg()


def routes(server: Any, call: Any, files: Any) -> list[Route]:
    def graph_svg(request: Request) -> Response:
        data = svg(server, call, files()).encode()
        tag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"ETag": tag})
        return Response(data, media_type="image/svg+xml", headers={"ETag": tag})

    return [Route("/graph.svg", graph_svg, methods=["GET"])]
