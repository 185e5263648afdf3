"""Every SQS bound and every tuning constant, defined once; the rest of the package imports them."""

from __future__ import annotations

from datetime import timedelta

# -- SQS's limits -----------------------------------------------------------------------------------
QUEUE_NAME_MAX_LENGTH = 80
FIFO_SUFFIX = ".fifo"
MAX_VISIBILITY_SECONDS = 43_200  # 12 hours, also the ceiling after the receive that issued a handle
MAX_DELAY_SECONDS = 900
MIN_RETENTION_SECONDS = 60
MAX_RETENTION_SECONDS = 1_209_600
MIN_MESSAGE_BYTES = 1024
MAX_MESSAGE_BYTES = 1_048_576  # SQS's ceiling (and its default) since 2025
# The Python API's default max_message_bytes (the contract's, SQS's before 2025); the SQS endpoint
# creates queues with SQS's default, MAX_MESSAGE_BYTES.
DEFAULT_MESSAGE_BYTES = 262_144
# A SendMessageBatch's messages together: SQS's fixed total, whatever each queue's own limit.
MAX_BATCH_BYTES = MAX_MESSAGE_BYTES
MIN_KMS_REUSE_SECONDS = 60  # KmsDataKeyReusePeriodSeconds
MAX_KMS_REUSE_SECONDS = 86_400
MAX_POLICY_CHARACTERS = 20_480  # a queue's access Policy document, kept (not enforced) here
MAX_RECEIVE_COUNT = 1000  # the highest max_receive_count a redrive policy may name
MAX_ATTRIBUTES = 10
MAX_ATTRIBUTE_NAME_LENGTH = 256
MAX_ID_LENGTH = 128  # group and deduplication ids
MAX_RECEIVE = 10_000  # receive(max_messages=...)
MAX_RECEIVE_DF = 10_000_000  # receive_df, peek_df, start_message_move
MAX_WAIT_SECONDS = 20
# The SQS endpoint refuses larger request bodies unread. A batch of messages at the size limit
# fits with room for its encoding (the query protocol's %XX triples a non-ASCII byte, JSON's \uXXXX
# doubles a 3-byte character), so an oversized message or batch is judged by the message rules
# (InvalidParameterValue, BatchRequestTooLong), not refused as a request.
MAX_REQUEST_BYTES = 4 * MAX_BATCH_BYTES
# The endpoint closes a connection that sends nothing for this long while it waits for (or reads)
# a request; answers are not bounded by it, so a 20-second long poll is unaffected.
ENDPOINT_READ_TIMEOUT_SECONDS = 30.0
# Connections the endpoint serves at once (each is a thread; a long poll holds one for up to 20 s);
# one more is answered 503 ServiceUnavailable, which SDKs retry.
ENDPOINT_MAX_CONNECTIONS = 128
# Closing the endpoint waits this long, at most, for each of: the requests under way (its long
# polls answer at once), its move tasks' chunks under way, its search for regions.
ENDPOINT_CLOSE_WAIT_SECONDS = 30.0
# How long the endpoint trusts that a queue it found still exists (and what it is) before
# asking the broker again; the broker's registry cache lives as long (ATTRIBUTE_CACHE_SECONDS).
QUEUE_LOOKUP_CACHE_SECONDS = 5.0
PURGE_EVERY_SECONDS = 60  # SQS: one PurgeQueue per queue a minute (the endpoint's rule)
# Messages in flight a queue allows (standard, FIFO). At the limit a standard queue's receive
# answers OverLimit (or nothing, when long polling) and a FIFO queue's answers nothing, as SQS's.
IN_FLIGHT_LIMITS = {False: 120_000, True: 120_000}
DEDUPLICATION_WINDOW = timedelta(minutes=5)
# Fair queues: a tenant (a standard queue's message group) is noisy while it holds more than this
# share of the queue's in-flight messages and at least this many of its own (SQS's thresholds).
NOISY_SHARE = 0.10
NOISY_MIN_IN_FLIGHT = 30
# A tenant's recent share of the consumers' time is its share of the in-flight messages averaged
# over about this long (each count weighs by the time since the one before).
RECENT_SECONDS = 10.0
# A count with fewer messages in flight in all says nothing of the tenants' shares.
SHARE_MIN_IN_FLIGHT = 10
# Noisy by its share of the consumers' time, a tenant also holds more than this many even shares
# (one over the count of tenants with messages): with fewer than ten tenants an even share is over
# NOISY_SHARE, and every tenant with a backlog would be noisy, so none would go first.
NOISY_EVEN_SHARES = 1.5

# -- queue defaults (SQS's) -------------------------------------------------------------------------
DEFAULT_VISIBILITY_SECONDS = 30
DEFAULT_RETENTION_SECONDS = 345_600  # 4 days

# -- layout -----------------------------------------------------------------------------------------
DEFAULT_SHARDS = 8
MAX_SHARDS = 64  # receipt handles carry the shard; their pattern is built from this bound

# -- tuning -----------------------------------------------------------------------------------------
LONG_POLL_INTERVAL_SECONDS = 0.25
IN_FLIGHT_RECOUNT_SECONDS = 30.0  # SQS's in-flight figure is approximate too
IN_FLIGHT_RECOUNT_SHARE = 0.8  # recount every time once the estimate is this close to the limit
# How long a broker trusts its count of each tenant's in-flight messages (which tenants are noisy)
# before a receive counts again: one grouped count a second, whatever the receive rate...
TENANT_RECOUNT_SECONDS = 1.0
# ... or this soon after the first count, and after one that found a tenant holding more than a
# busy share of the backlog with nobody judged noisy (rules/fairness.py `suspect`): a tenant that
# starts to flood is judged within a count or two of its backlog forming.
TENANT_SOON_SECONDS = 0.25
# A count due while the last is more recent than this runs beside the receives (tenants.py).
TENANT_STALE_SECONDS = 5.0
# A receive looks for quiet tenants' messages among those sent since this long before the count
# (ids sort by send time, so older files are skipped), besides the oldest the count found.
QUIET_LOOKBACK = timedelta(seconds=2)
# Queue tables have no deletion vectors (a claim or delete then runs fewer Spark jobs; see
# docs/performance.md), so an UPDATE rewrites each file it touches: writes and compaction keep
# files small enough that rewriting one costs little next to the commit.
QUEUE_ROWS_PER_FILE = 5_000
COMPACTED_FILE_BYTES = 1 << 20
# On object storage a compaction runs under a lease (store/native_upkeep.py); one whose process
# died lapses after this long, far longer than compacting a queue table takes.
COMPACTION_LEASE = timedelta(minutes=15)
# Beside consumers, a broker merges the small files its sends left (messages/compaction.py) once
# it has made this many appends to a table since, into files of up to SMALL_FILE_BYTES: a claim
# then rewrites little, and each statement reads few files (each costs ~0.2 ms more per file).
COMPACT_AFTER_APPENDS = 32
SMALL_FILE_BYTES = 64 << 10
# A queue whose random shard holds this many more visible messages than a receive wants is deep:
# receives read one shard (roughly its oldest) instead of the whole queue's oldest (messages/claim.py).
DEEP_SHARD_ROWS = 1_000
# A send of this many rows or more is spread over every shard, in runs of consecutive ids (one
# file per shard): receivers of different processes, each starting at a random shard, then find
# work apart, and a claim rewrites a file of its shard's share rather than of the whole send.
SPREAD_SEND_ROWS = 1_000
ATTRIBUTE_CHANGE_ATTEMPTS = 10  # reads of a queue's attributes a change retries on a concurrent one
# A receive's read asks for up to SPARE_FACTOR times the rows it wants (at most SPARE_ROWS, and
# SPARE_BYTES of the queue's largest messages, more), and the broker keeps the rest for its next
# receives for SPARE_SECONDS by the queue's clock (engine/messages/spares.py): a read of a few
# small rows costs about what a read of one does, and a claim from spares skips it.
SPARE_FACTOR = 10
SPARE_ROWS = 100
SPARE_SECONDS = 1.0
SPARE_BYTES = 16 << 20
DEPTH_CHECK_SECONDS = 30.0  # how often a shallow read asks whether the queue became deep
# A claim hides its messages this much longer at most for its own statement (engine/messages/handout.py).
HANDOUT_ALLOWANCE_MAX_SECONDS = 5.0
# The worker loop claims batches up to this size through the driver in one commit with the last
# batch's deletes (engine/rounds/statement.py); bigger ones are staged as receive_df claims.
EXCHANGE_MAX_BATCH = 100_000
# Up to this many rows (retired, changed and claimed) a round's statement is one UPDATE; above it
# one MERGE, whose join costs less than the UPDATE's long literal lists (engine/rounds/statement.py).
# By engine: delta-rs's UPDATE of 100 rows already costs twice its MERGE, and both cost the same
# at ~50 (docs/performance.md, "What moves each figure").
EXCHANGE_UPDATE_MAX_ROWS = {"spark": 200, "native": 50}
# A shared round carries the oldest waiting operations up to this many rows (an operation larger
# than that runs alone): four worker loops at batch 10,000 share one commit.
ROUND_MAX_ROWS = 2 * 4 * 10_000
# A native round carries up to this many rows, and a larger exchange retires and claims in two
# rounds: an UPDATE (the form of a round naming one message twice) of ~10,000 retirements and
# ~10,000 claims overflowed delta-rs's stack (deltalake 1.6.6); MERGE rounds run as fast split.
NATIVE_ROUND_MAX_ROWS = 4_000
ATTRIBUTE_CACHE_SECONDS = 5.0  # as in SQS, attribute changes propagate within moments
CLAIMS_KEPT = timedelta(days=1)  # receive_df results stay re-readable this long after the claim
MOVE_HOLD = timedelta(hours=12)  # how long a marked row stays hidden if its move is interrupted
# FIFO tombstones outlive the window a little, so the redrive job always drops a late duplicate
# (whose send committed just before the window closed) before the tombstone that exposes it.
TOMBSTONE_LIFETIME = DEDUPLICATION_WINDOW * 2

# -- table upkeep defaults (conf/redrive.toml overrides them per queue) -------------------------------
UPKEEP_EVERY_SECONDS = 3600
# Every removed file stays a tombstone in each checkpoint for this long, and every operation's state
# rebuild replays them: a day of them made a busy queue 3x slower (docs/performance.md, "Flat over
# time"). An hour still outlasts any read of a queue table by far.
FILE_RETENTION_HOURS = 1
LOG_RETENTION_HOURS = 48
# On a local root each redrive pass trims `_delta_log` to this much history (store/logtrim.py).
LOCAL_LOG_MINUTES = 5
CHECKPOINT_INTERVAL = 20
REDRIVE_EVERY_SECONDS = 60
# The most one shared append carries for the concurrent sends of one broker (engine/messages/send.py):
# rows, and characters of bodies (a round is one Arrow table in memory).
SEND_ROUND_MAX_ROWS = 10_000
SEND_ROUND_MAX_BYTES = 64 * 1024 * 1024
