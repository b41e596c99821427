"""iceduck.serve: `iceduck serve`, a warehouse's SQLite catalog served as an Iceberg REST catalog.

A front end (top layer, beside the CLI). `server.py` is the command and `RestServer`;
`warehouse.py` the REST operations on the warehouse; `routes.py` maps requests to them;
`views.py` the view endpoints; `asgi.py` the HTTP (an ASGI app run by uvicorn, imported when
a server starts). The wire conventions it shares with the client are `iceduck.rest.protocol`.
"""
