"""iceduck.serve: `iceduck serve`, a warehouse's SQLite catalog served as an Iceberg REST catalog.

A front end (top layer, beside the CLI). `server.py` holds the warehouse's REST operations and the
routes; `views.py` the view endpoints; `asgi.py` the HTTP (an ASGI app run by uvicorn, imported when
a server starts). The wire conventions it shares with the client are `iceduck.rest.protocol`.
"""
