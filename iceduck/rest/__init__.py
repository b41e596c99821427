"""iceduck.rest: the Iceberg REST catalog protocol, the client end (catalog layer).

- `protocol.py`: pure wire conventions shared by both ends (namespace encoding, error bodies, the
  error types of the spec and which iceduck error each one is).
- `client.py`: `RestCatalog`, a REST catalog as an iceduck catalog; `view_client.py` its view
  endpoints; `sigv4.py` signs its requests for AWS.

The serving end, `iceduck serve`, is `iceduck.serve` (a front end, on the top layer): it imports
`protocol` from here, and nothing here imports it.
"""
