"""The CNC's RESTCONF-style HTTP API (RFC 8040 shapes, YANG JSON bodies), served by aiohttp.

::

    POST /restconf/operations/keepon-cnc:join             {"keepon-cnc:input": {...}}  → 200 {"keepon-cnc:output": ...}
    POST /restconf/operations/keepon-cnc:leave            {"keepon-cnc:input": {"stream-id": ...}}
    GET  /restconf/data/keepon-cnc:streams                every stream's status
    GET  /restconf/data/keepon-cnc:streams/stream=ID      one stream's status and its talker's answer

Errors are RFC 8040 error documents, ``{"ietf-restconf:errors": {"error": [{"error-type", "error-tag",
"error-path", "error-message", "error-info"}]}}``: 400 ``invalid-value`` (or ``malformed-message``) for bad input,
naming the element in ``error-path``; 404 ``data-missing`` for an unknown stream; 409 ``data-exists`` for a stream
joined twice; 409 ``resource-denied`` for a join that does not fit, its certificate in
``error-info/keepon-cnc:certificate``; 503 ``operation-failed`` when a device refused a change (rolled back).
The planner runs in a worker thread, one request at a time (:class:`~keepon_plan.cnc.service.Cnc`'s lock).
"""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from .distribute import DistributionError
from .incremental import Refused
from .service import Cnc
from .tsn_types import RequestError

MEDIA = "application/yang-data+json"
OPS = "/restconf/operations/keepon-cnc:"
DATA = "/restconf/data/keepon-cnc:streams"


def _error(status: int, tag: str, path: str, message: str, info: dict | None = None) -> web.Response:
    err = {"error-type": "application", "error-tag": tag, "error-path": path, "error-message": message}
    if info is not None:
        err["error-info"] = info
    return web.Response(status=status, text=json.dumps({"ietf-restconf:errors": {"error": [err]}}), content_type=MEDIA)


def _path(op: str, element: str) -> str:
    return f"/keepon-cnc:{op}/input" + (f"/{element}" if element else "")


async def _call(request: web.Request, op: str, fn, *args) -> web.Response:
    try:
        result = await asyncio.get_running_loop().run_in_executor(None, fn, *args)
    except RequestError as exc:
        status = {"data-missing": 404, "data-exists": 409}.get(exc.tag, 400)
        info = {"keepon-cnc:certificate": exc.certificate} if exc.certificate else None
        return _error(status, exc.tag, _path(op, exc.element), exc.message, info)
    except Refused as exc:
        return _error(
            409,
            "resource-denied",
            _path(op, ""),
            exc.certificate["reason"],
            {"keepon-cnc:certificate": exc.certificate},
        )
    except DistributionError as exc:
        return _error(503, "operation-failed", _path(op, ""), f"device {exc.device}: {exc.message} (rolled back)")
    return web.Response(text=json.dumps(result), content_type=MEDIA)


async def _body(request: web.Request, op: str):
    try:
        return json.loads(await request.text()), None
    except ValueError as exc:
        return None, _error(400, "malformed-message", _path(op, ""), f"the body is not JSON: {exc}")


def app(cnc: Cnc) -> web.Application:
    async def join(request: web.Request) -> web.Response:
        body, bad = await _body(request, "join")
        return bad or await _call(request, "join", cnc.join, body)

    async def leave(request: web.Request) -> web.Response:
        body, bad = await _body(request, "leave")
        return bad or await _call(request, "leave", cnc.leave, body)

    async def streams(request: web.Request) -> web.Response:
        return await _call(request, "streams", cnc.streams)

    async def stream(request: web.Request) -> web.Response:
        return await _call(request, "streams", cnc.status, request.match_info["sid"])

    a = web.Application()
    a.router.add_post(OPS + "join", join)
    a.router.add_post(OPS + "leave", leave)
    a.router.add_get(DATA, streams)
    a.router.add_get(DATA + "/stream={sid}", stream)
    return a


async def serve(cnc: Cnc, host: str, port: int, ready=None, stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set (or forever); ``ready(address)`` once listening (the port actually bound)."""
    runner = web.AppRunner(app(cnc), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    try:
        if ready is not None:
            ready(runner.addresses[0])
        await (stop or asyncio.Event()).wait()
    finally:
        await runner.cleanup()
