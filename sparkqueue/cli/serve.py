"""`sparkqueue serve` and `sparkqueue console`: the SQS endpoint, the web console or both over the
resolved root or catalog, until Ctrl-C or SIGTERM."""

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

HostOption = Annotated[
    str, typer.Option(help="Address to bind (other than localhost: keys needed).")
]
KeysOption = Annotated[
    str | None,
    typer.Option(help="key:secret lines to accept (else $SPARKQUEUE_ACCESS_KEYS)."),
]
TlsCertOption = Annotated[
    str | None, typer.Option(help="Serve HTTPS with this PEM certificate (chain) file.")
]
TlsKeyOption = Annotated[str | None, typer.Option(help="The PEM private key of --tls-cert.")]
RedriveEveryOption = Annotated[
    float, typer.Option(help="Seconds between redrive passes over the queues (0: none).")
]


@command
def serve(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 9324,
    account: Annotated[
        str, typer.Option(help="The account id in queue URLs and ARNs.")
    ] = "000000000000",
    region: Annotated[
        str | None,
        typer.Option(
            help="Serve this region only, on the root itself (default: every region, each its"
            " own queues; us-east-1's on the root)."
        ),
    ] = None,
    redrive_every: RedriveEveryOption = REDRIVE_EVERY_SECONDS,
    keys_file: KeysOption = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    max_connections: Annotated[
        int, typer.Option(help="Connections served at once; one more is answered 503.")
    ] = ENDPOINT_MAX_CONNECTIONS,
    console: Annotated[
        bool, typer.Option("--console", help="Also serve the web console under /console/.")
    ] = False,
    root: RootOption = None,
    catalog: CatalogOption = None,
) -> None:
    """Serves the queues over Amazon SQS's HTTP API, for boto3, the AWS CLI and any AWS SDK."""
    run_server(
        root, catalog, keys_file, tls_cert, tls_key,
        host=host, port=port, account=account, region=region, redrive_every=redrive_every,
        max_connections=max_connections, console=console,
    )  # fmt: skip


@command
def console(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free one).")] = 9325,
    redrive_every: RedriveEveryOption = 0,
    keys_file: KeysOption = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
) -> None:
    """Serves the web console alone at http://HOST:PORT/console/ (no SQS API)."""
    run_server(
        root, catalog, keys_file, tls_cert, tls_key,
        host=host, port=port, redrive_every=redrive_every, console=True, sqs=False,
    )  # fmt: skip


def run_server(
    root: str | None,
    catalog: str | None,
    keys_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    **options: Any,
) -> None:
    """Serves until Ctrl-C or SIGTERM: an SqsEndpoint with `options` (the SQS API, the console,
    or both)."""
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
        access_keys=keys,
        tls_cert=tls_cert,
        tls_key=tls_key,
        open_spark=open_spark,
        **options,
    )
    done = threading.Event()

    def stop(*_: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with endpoint:
        checked = f"{len(keys.secrets)} access key(s)" if keys else "no access keys: localhost only"
        served = [f"SQS on {endpoint.url}/{endpoint.service.naming.account}/<queue>"]
        served = served if endpoint.sqs else []
        served += [f"the console on {endpoint.url}/console/"] if endpoint.console else []
        render.out.print(
            f"serving {' and '.join(served)} for {broker} ({checked})",
            highlight=False,
            soft_wrap=True,
        )
        done.wait()


def native_on_object_storage(broker: Any) -> bool:
    """Whether the endpoint keeps Spark out of its process: it serves object storage natively,
    where Spark's commits and the native engine's do not take turns (a local root has the commit
    lock for that). Its redrive passes and moves then run through the native engine."""
    return broker.engine == "native" and is_object_store(broker.root or "")
