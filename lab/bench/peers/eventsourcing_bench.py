"""Appends events with the Python eventsourcing library's PostgreSQL
recorder, the workload `logbook bench peers` runs on every store.

Reads one JSON object from the environment variable LOGBOOK_PEER_CONFIG: host, port, user, password, dbname,
table, events, batch, writers, streams, payload. Each writer appends
`batch` events to one of its own streams (originators) per call to
insert_events, with the next versions, until `events` are written. Prints
one JSON object: events, seconds, events_per_sec, p50_ms, p99_ms.
"""
import json
import os
import sys
import threading
import time
import uuid

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore


def main() -> None:
    cfg = json.loads(os.environ["LOGBOOK_PEER_CONFIG"])
    writers = cfg["writers"]
    datastore = PostgresDatastore(
        cfg["dbname"], cfg["host"], cfg["port"], cfg["user"], cfg["password"],
        pool_size=writers, max_overflow=0, connect_timeout=60,
    )
    recorder = PostgresApplicationRecorder(datastore, events_table_name=cfg["table"])
    recorder.create_table()
    # Every writer's connection open before the clock starts (and opened
    # from this thread: psycopg_pool's wait is not safe from many threads).
    datastore.pool.wait(timeout=300)
    appends = (cfg["events"] + cfg["batch"] - 1) // cfg["batch"]
    payload = os.urandom(cfg["payload"])
    lock = threading.Lock()
    claimed = [0]
    latencies: list[float] = []
    errors: list[str] = []

    def writer(w: int) -> None:
        streams = [uuid.uuid4() for _ in range(max(1, cfg["streams"] // writers))]
        versions = [0] * len(streams)
        mine: list[float] = []
        k = 0
        try:
            while True:
                with lock:
                    n = claimed[0]
                    if n >= appends:
                        break
                    claimed[0] += 1
                size = min(cfg["batch"], cfg["events"] - n * cfg["batch"])
                s = k % len(streams)
                k += 1
                batch = [
                    StoredEvent(streams[s], versions[s] + i + 1, "bench.Event", payload)
                    for i in range(size)
                ]
                t0 = time.perf_counter()
                recorder.insert_events(batch)
                mine.append(time.perf_counter() - t0)
                versions[s] += size
        except Exception as e:  # reported, not hidden
            errors.append(repr(e))
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if errors:
        print(errors[0], file=sys.stderr)
        sys.exit(1)
    latencies.sort()
    pct = lambda q: latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000
    print(json.dumps({
        "events": cfg["events"], "seconds": seconds,
        "events_per_sec": cfg["events"] / seconds,
        "p50_ms": pct(0.5), "p99_ms": pct(0.99),
    }))
    datastore.close()


if __name__ == "__main__":
    main()
