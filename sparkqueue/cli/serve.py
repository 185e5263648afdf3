"""`sparkqueue serve`: the SQS endpoint over the resolved root or catalog, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from typing import Annotated, Any

import typer

from ..errors import UnsupportedOperation
from ..limits import ENDPOINT_MAX_CONNECTIONS, REDRIVE_EVERY_SECONDS
from ..store.tables import is_object_store
from . import render
from .app import CatalogOption, RootOption, command, open_broker


@command
def serve(
    host: Annotated[
        str, typer.Option(help="Address to bind (other than localhost: keys needed).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 9324,
    account: Annotated[
        str, typer.Option(help="The account id in queue URLs and ARNs.")
    ] = "000000000000",
    region: Annotated[
        str | None,
        typer.Option(help="Serve this region only (default: any; ARNs say us-east-1)."),
    ] = None,
    redrive_every: Annotated[
        float, typer.Option(help="Seconds between redrive passes over the queues (0: none).")
    ] = REDRIVE_EVERY_SECONDS,
    keys_file: Annotated[
        str | None,
        typer.Option(help="key:secret lines to accept (else $SPARKQUEUE_ACCESS_KEYS)."),
    ] = None,
    tls_cert: Annotated[
        str | None, typer.Option(help="Serve HTTPS with this PEM certificate (chain) file.")
    ] = None,
    tls_key: Annotated[str | None, typer.Option(help="The PEM private key of --tls-cert.")] = None,
    max_connections: Annotated[
        int, typer.Option(help="Connections served at once; one more is answered 503.")
    ] = ENDPOINT_MAX_CONNECTIONS,
    root: RootOption = None,
    catalog: CatalogOption = None,
) -> None:
    """Serves the queues over Amazon SQS's HTTP API, for boto3, the AWS CLI and any AWS SDK."""
    from ..endpoint import AccessKeys, SqsEndpoint
    from ..endpoint.transport import tls_context

    keys = AccessKeys.configured(keys_file)
    tls_context(tls_cert, tls_key)  # a bad pair fails now, not after Spark has started
    broker = open_broker(root, catalog)  # a root: the native engine, no JVM

    def open_spark() -> Any:
        if native_on_object_storage(broker):
            raise UnsupportedOperation(
                "this endpoint writes its object storage through the native engine alone: Spark's"
                " commits would not take turns with it there"
            )
        return open_broker(root, catalog, spark=True)

    endpoint = SqsEndpoint(
        broker,
        host=host,
        port=port,
        access_keys=keys,
        account=account,
        region=region,
        redrive_every=redrive_every,
        tls_cert=tls_cert,
        tls_key=tls_key,
        max_connections=max_connections,
        open_spark=open_spark,
    )
    done = threading.Event()

    def stop(*_: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with endpoint:
        checked = f"{len(keys.secrets)} access key(s)" if keys else "no access keys: localhost only"
        render.out.print(
            f"serving SQS on {endpoint.url}/{account}/<queue> for {broker} ({checked})",
            highlight=False,
            soft_wrap=True,
        )
        done.wait()


def native_on_object_storage(broker: Any) -> bool:
    """Whether the endpoint keeps Spark out of its process: it serves object storage natively,
    where Spark's commits and the native engine's do not take turns (a local root has the commit
    lock for that). Its redrive passes and moves then run through the native engine."""
    return broker.engine == "native" and is_object_store(broker.root or "")
