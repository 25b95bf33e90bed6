"""A local S3-compatible object store for tests: moto's S3 server on 127.0.0.1.

Not a stub: moto answers the S3 REST API over HTTP, and checkray reaches it through
pyarrow's S3 filesystem exactly as it reaches AWS (``s3://bucket/run``), with the endpoint
and credentials taken from the standard AWS environment variables (``env``). Those
variables are handed to whatever must reach the store: ``monkeypatch`` for this process,
``ray job submit --runtime-env-json '{"env_vars": ...}'`` for a job's processes.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class LocalS3:
    endpoint: str  # http://127.0.0.1:PORT
    bucket: str
    env: dict[str, str]  # AWS_* variables that make s3:// URIs reach this store

    def filesystem(self):
        """A pyarrow S3 filesystem on this store (for reading back what a run wrote)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(
            access_key=self.env["AWS_ACCESS_KEY_ID"],
            secret_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region=self.env["AWS_DEFAULT_REGION"],
            endpoint_override=self.endpoint,
            allow_bucket_creation=True,
        )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def local_s3(bucket: str = "checkray-test") -> Iterator[LocalS3]:
    """Start moto's S3 server on a free loopback port with one empty bucket; stop it after."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request otherwise
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "checkray-test",
        "AWS_SECRET_ACCESS_KEY": "checkray-test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,  # read by pyarrow (Arrow >= 15) and boto3
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance-metadata probe for credentials
    }
    store = LocalS3(endpoint, bucket, env)
    try:
        store.filesystem().create_dir(bucket)
        yield store
    finally:
        server.stop()
