"""Reads a logbook topic published in Avro with Confluent's own consumer
and AvroDeserializer, as any Confluent user would.

Usage: confluent_consumer.py REGISTRY_URL TOKEN BROKERS TOPIC COUNT

Prints one JSON line per record: position, stream, type and the payload in
hex. Exits non-zero if COUNT records do not arrive within 60 seconds.
"""
import json
import sys
import time

from confluent_kafka import DeserializingConsumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer

url, token, brokers, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
registry = SchemaRegistryClient({"url": url, "basic.auth.user.info": "consumer:" + token})
consumer = DeserializingConsumer({
    "bootstrap.servers": brokers,
    "group.id": "confluent-consumer-" + topic,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
    "value.deserializer": AvroDeserializer(registry),
})
consumer.subscribe([topic])
seen = 0
deadline = time.time() + 60
while seen < count and time.time() < deadline:
    msg = consumer.poll(1.0)
    if msg is None:
        continue
    if msg.error():
        sys.exit(f"consumer error: {msg.error()}")
    ev = msg.value()
    print(json.dumps({"position": ev["position"], "stream": ev["stream"], "type": ev["type"],
                      "key": msg.key().decode(), "data": ev["data"].hex()}))
    seen += 1
consumer.close()
if seen < count:
    sys.exit(f"read {seen} records, want {count}")
