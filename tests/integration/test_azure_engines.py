"""Both engines on one queue on Azure (Azurite, tests/azurite.py): native processes receive and
delete while a Spark job (a session from `spark_session(storage_options=...)`, Hadoop's ABFS
client) sends DataFrames, claims them with `receive_df`, deletes them with `delete_df` and runs the
redrive pass, and both kinds are killed with SIGKILL at random moments. Afterwards every message
is accounted for, none was handed out twice within its visibility window, both engines committed,
no Spark transaction was committed twice, no log version was written twice, and every commit of
either engine was a conditional put (journaled by the proxy of sparkqueue/bench/faults.py, in
front of Azurite with no fault armed). A version is Azure's to refuse to a second writer:
delta-rs puts it with `If-None-Match: *`, Spark's log store renames it into place (on the Blob
endpoint, a copy sent with the same condition)."""

from __future__ import annotations

from collections import Counter

import pytest
from deltalake import DeltaTable

from sparkqueue import Broker
from sparkqueue.bench.faults import fault_proxy
from sparkqueue.bench.reckoning import DEAD_LETTERS, QUEUE
from sparkqueue.errors import InvalidParameterValue
from tests.integration.helpers import engines_through_kills

pytestmark = pytest.mark.usefixtures("quick_drivers")


@pytest.fixture
def credentials(azure, monkeypatch) -> dict[str, str]:
    """The emulator's account and address in this process's environment (and its children's):
    delta-rs reads the emulator's address from there alone."""
    for name, value in azure.options.items():
        monkeypatch.setenv(name, value)
    return azure.options


def test_both_engines_share_a_queue_on_azure_through_kills(
    azure, credentials, tmp_path, monkeypatch
):
    root = f"{azure.new_container('abfs')}/queues"
    with fault_proxy(azure.url) as journal:  # no faults: it journals each log version's puts
        through = {**credentials, "AZURITE_BLOB_STORAGE_URL": journal.url}
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", journal.url)  # both engines' address
        engines_through_kills(root, tmp_path / "records", through, seed=49)
        puts = journal.log_puts()
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", azure.url)
    assert all(put["conditional"] for put in puts)  # both engines' commits
    agents = Counter(put["agent"].split("/")[0] for put in puts)
    assert len(agents) > 1, agents  # delta-rs's (object_store) and Spark's (ABFS)
    written = Counter(put["key"] for put in puts if put["status"] < 300)
    assert max(written.values()) == 1  # no version written twice

    broker = Broker(None, root, storage_options=credentials)
    infos = [
        info
        for name in (QUEUE, DEAD_LETTERS)
        for info in DeltaTable(
            broker.context.record(name).location, storage_options=credentials
        ).history()
    ]
    engines = Counter("spark" if "Spark" in (info.get("engineInfo") or "") else "delta-rs"
                      for info in infos)  # fmt: skip
    assert engines["spark"] > 0 and engines["delta-rs"] > 0, engines
    spark_transactions = Counter(info["txnId"] for info in infos if "txnId" in info)
    assert spark_transactions and max(spark_transactions.values()) == 1  # none committed twice


def test_delta_rs_form_of_an_azure_root_is_refused_beside_spark(spark, azure, credentials):
    """`az://container` names no account, which Spark's ABFS client needs: a broker with a
    session refuses to share such a root, and says which form to give."""
    root = f"{azure.new_container()}/queues"
    with pytest.raises(InvalidParameterValue, match="abfss://"):
        Broker(spark, root, storage_options=credentials)
