"""iceduck.rest: the Iceberg REST catalog protocol, both ends.

- `protocol.py`: pure wire conventions shared by both ends (namespace encoding, error bodies, the
  error types of the spec and which iceduck error each one is). Catalog layer.
- `client.py`: `RestCatalog`, a REST catalog as an iceduck catalog. Catalog layer: it imports
  nothing above `iceduck.catalog`.
- `server.py`: `iceduck serve`, the SQLite catalog of a warehouse served over REST. Top layer (next to
  the CLI): it uses the lake, the transaction layer and the catalog.
- `asgi.py`: the server's HTTP, an ASGI application with the request bounds and timeouts, run by
  uvicorn (imported only when a server starts).

This package file imports neither, so importing the client never pulls in the server.
"""
