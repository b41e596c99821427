"""AWS Signature Version 4 for REST catalog requests (AWS Glue, S3 Tables, API Gateway).

`SigV4Signer` signs each request the client sends with botocore's signer (botocore comes with
iceduck's S3 extra; it is imported on the first signer, not with the client):

- the signing name (the AWS service: `glue`, `s3tables`, `execute-api`) and region come from the
  caller, else from the endpoint, which names them as `<service>.<region>` somewhere in its host
  or path (`https://glue.us-east-1.amazonaws.com/iceberg`, `http://127.0.0.1:9000/aws.glue.us-east-1`,
  as DuckDB's extension reads them);
- the keys come from the caller (a `CREATE SECRET (TYPE s3, ...)`), else from botocore's chain
  (`AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, `AWS_PROFILE` and ~/.aws, container and instance
  roles); keys that expire (assumed roles, SSO) are renewed by botocore between requests;
- every request carries `x-amz-content-sha256`, the SHA-256 of its body (of nothing for a GET),
  and that header is signed, so a body altered on the way fails the signature.

`endpoint_for(endpoint_type, warehouse, region)` is the endpoint DuckDB's extension derives for
`ENDPOINT_TYPE glue` (`https://glue.<region>.amazonaws.com/iceberg`, warehouse an account id or
catalog path) and `s3_tables` (`https://s3tables.<region>.amazonaws.com/iceberg`, warehouse the
table bucket's ARN, whose fourth part is the region).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from iceduck.errors import ForbiddenError, UnsupportedFormatError, ValidationError

PAYLOAD_HEADER = "x-amz-content-sha256"
# API Gateway: what a catalog behind it signs for (PyIceberg's default too)
DEFAULT_SIGNING_NAME = "execute-api"

# an AWS region: two letters, an optional `-gov`/`-iso...` part, a word, a number (us-east-1, eu-central-2,
# us-gov-west-1, cn-north-1, ap-southeast-7)
_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")
# DuckDB's warehouse forms for Glue: ':', an account, 'account:catalog', 'cat/child', 'account:cat/child'
_GLUE_WAREHOUSE = re.compile(r"^(:|\d{12}|\d{12}:[^:/]+|[^:]+/[^:]+|\d{12}:[^/]+/[^:]+)$")
ENDPOINT_TYPES = ("glue", "s3_tables")


@dataclass(frozen=True, slots=True)
class AwsKeys:
    """Static AWS credentials (from a secret)."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None


def service_and_region(endpoint: str) -> tuple[str | None, str | None]:
    """(service, region) an endpoint names as `<service>.<region>` in its host or path; (None, None)
    when it names no region (`http://localhost:8181`)."""
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    words = [w for w in re.split(r"[./:]", f"{parts.netloc}/{parts.path}".lower()) if w]
    for i, word in enumerate(words):
        if _REGION.match(word):
            service = words[i - 1] if i > 0 and not words[i - 1].isdigit() else None
            return service, word
    return None, None


def endpoint_for(endpoint_type: str, warehouse: str, region: str | None) -> tuple[str, str]:
    """(endpoint, signing name) of `ENDPOINT_TYPE glue | s3_tables` for the attached `warehouse`."""
    kind = endpoint_type.lower()
    if kind == "s3_tables":
        parts = warehouse.split(":")
        if len(parts) != 6 or parts[0] != "arn" or not _REGION.match(parts[3]):
            raise ValidationError(
                f"ENDPOINT_TYPE s3_tables: attach the table bucket's ARN "
                f"(arn:aws:s3tables:<region>:<account>:bucket/<name>), not {warehouse!r}"
            )
        return f"https://s3tables.{parts[3]}.amazonaws.com/iceberg", "s3tables"
    if kind == "glue":
        if not _GLUE_WAREHOUSE.match(warehouse):
            raise ValidationError(
                f"ENDPOINT_TYPE glue: the attached path {warehouse!r} is not a Glue catalog: give ':', a "
                "12-digit account id, '<account>:<catalog>', '<catalog>/<child>' or '<account>:<catalog>/<child>'"
            )
        if not region:
            raise ValidationError(
                "ENDPOINT_TYPE glue needs a region: REGION in the S3 secret, SIGNING_REGION, or AWS_REGION"
            )
        return f"https://glue.{region}.amazonaws.com/iceberg", "glue"
    raise ValidationError(f"ENDPOINT_TYPE must be one of {', '.join(ENDPOINT_TYPES)}, not {endpoint_type!r}")


def _botocore() -> tuple[Any, Any, Any, Any]:
    try:
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        import botocore.session
    except ImportError:  # pragma: no cover - botocore comes with the s3 extra
        raise UnsupportedFormatError(
            "AUTHORIZATION_TYPE 'sigv4' needs botocore: pip install 'iceduck[s3]'"
        ) from None
    return botocore.auth, botocore.awsrequest, botocore.credentials, botocore.session


class SigV4Signer:
    """Signs requests for one catalog (see the module docstring)."""

    def __init__(
        self,
        endpoint: str,
        *,
        signing_name: str | None = None,
        signing_region: str | None = None,
        keys: AwsKeys | None = None,
        profile: str | None = None,
    ) -> None:
        """Resolve the signing name, region and credentials now: a catalog that cannot sign fails
        when it is opened, with what is missing."""
        auth, awsrequest, credentials, session_module = _botocore()
        self._make_credentials = credentials.Credentials
        self._auth = auth
        self._awsrequest = awsrequest
        found_name, found_region = service_and_region(endpoint)
        session = None
        region = signing_region or found_region
        if region is None or keys is None:
            session = session_module.Session(profile=profile) if profile else session_module.get_session()
            # AWS_REGION is what the SDKs read first; botocore's config reads AWS_DEFAULT_REGION
            region = region or os.environ.get("AWS_REGION") or session.get_config_variable("region")
        if not region:
            raise ValidationError(
                f"{endpoint}: AUTHORIZATION_TYPE 'sigv4' needs a signing region: SIGNING_REGION, an endpoint "
                "naming one (glue.us-east-1.amazonaws.com), or AWS_REGION"
            )
        self.signing_name = signing_name or found_name or DEFAULT_SIGNING_NAME
        self.region = str(region)
        self._static = None
        self._chain = None
        if keys is not None:
            self._static = credentials.Credentials(
                keys.access_key_id, keys.secret_access_key, keys.session_token
            )
        else:
            assert session is not None
            try:
                self._chain = session.get_credentials()
            except Exception as e:  # botocore: a broken profile, an unreachable role endpoint
                raise ForbiddenError(f"{endpoint}: cannot load AWS credentials: {e}") from None
            if self._chain is None:
                raise ForbiddenError(
                    f"{endpoint}: AUTHORIZATION_TYPE 'sigv4' found no AWS credentials: CREATE SECRET (TYPE s3, "
                    "KEY_ID ..., SECRET ...), AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or an AWS profile"
                )

    def __repr__(self) -> str:
        return f"SigV4Signer({self.signing_name!r}, {self.region!r})"

    def _credentials(self) -> Any:
        if self._static is not None:
            return self._static
        assert self._chain is not None
        frozen = self._chain.get_frozen_credentials()  # renews expiring keys first
        return self._make_credentials(frozen.access_key, frozen.secret_key, frozen.token)

    def sign(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None) -> dict[str, str]:
        """The headers to send: `headers` and the body's hash, `X-Amz-Date`, the session token if
        any, and `Authorization`, signed for `method` on `url` (exactly as it is sent)."""
        request = self._awsrequest.AWSRequest(
            method=method,
            url=url,
            data=body or b"",
            headers={**headers, PAYLOAD_HEADER: hashlib.sha256(body or b"").hexdigest()},
        )
        self._auth.SigV4Auth(self._credentials(), self.signing_name, self.region).add_auth(request)
        return {str(k): str(v) for k, v in request.headers.items()}


__all__ = ["ENDPOINT_TYPES", "AwsKeys", "SigV4Signer", "endpoint_for", "service_and_region"]
