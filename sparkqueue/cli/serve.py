"""`sparkqueue serve`: the SQS endpoint over the resolved root or catalog, until Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import threading
from typing import Annotated, Any

import typer

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
    region: Annotated[str, typer.Option(help="The region in queue ARNs.")] = "us-east-1",
    keys_file: Annotated[
        str | None,
        typer.Option(help="key:secret lines to accept (else $SPARKQUEUE_ACCESS_KEYS)."),
    ] = None,
    root: RootOption = None,
    catalog: CatalogOption = None,
) -> None:
    """Serves the queues over Amazon SQS's HTTP API, for boto3, the AWS CLI and any AWS SDK."""
    from ..endpoint import AccessKeys, SqsEndpoint

    keys = AccessKeys.configured(keys_file)
    broker = open_broker(root, catalog)
    endpoint = SqsEndpoint(
        broker, host=host, port=port, access_keys=keys, account=account, region=region
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
