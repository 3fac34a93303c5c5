"""An S3 in this process for the tests and the soak: moto's own WSGI app in a thread, on
127.0.0.1 and a port the kernel picks, one request at a time.

Requests are handled one at a time because real S3 makes a conditional ``If-None-Match: *``
PUT atomic, and moto checks the key and then stores it without a lock, so two threads could
both pass the check. Serialising requests gives moto the atomicity S3 has, so a test of the
exactly-one-winner rule (attempts, epochs) checks our code, not a race inside the fake.
moto is a development dependency: nothing shipped imports this module.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

__all__ = ["moto_s3_server"]


@contextmanager
def moto_s3_server() -> Iterator[str]:
    """Run moto; yield its endpoint URL (``http://127.0.0.1:<port>``); stop it on exit."""
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialised(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        with lock:
            result = app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                if hasattr(result, "close"):
                    result.close()

    server = make_server(
        "127.0.0.1", 0, serialised, threaded=True, request_handler=MotoRequestHandler
    )
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="moto-s3", daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
