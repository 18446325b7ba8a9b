// Package kafkabus carries the event log over Kafka: a Publisher copies
// every committed event to a topic, exactly once and in per-stream order
// (the record key is the stream id, so a stream lives in one partition);
// a ReplicaStore lets a read replica follow the log from that topic instead
// of the store; a Processor shares the topic's partitions among the members
// of a consumer group. Both readers fall back to the store for whatever
// Kafka no longer holds.
//
// # Exactly once across crashes
//
// The Publisher is a transactional producer with a fixed transactional ID.
// Each Kafka transaction carries a contiguous range of log positions, read
// in global order, and a transaction begins only after the previous one
// committed. What the topic holds committed is therefore always a prefix
// 1..P of the log. On start the Publisher first claims the transactional ID
// (InitProducerID): that fences any older publisher with the same ID and
// makes the coordinator finish whatever transaction it left open — abort
// it, or complete a commit it had already asked for. Only then does it look
// for P: the largest position among the last committed data record of every
// partition, found by reading each partition backwards from its last
// stable offset. It resumes at P+1. An event committed to the store but not
// to Kafka (the crash window) is published by the next run; one whose
// transaction committed is never published again.
//
// Consumers must read with the read_committed isolation level; the readers
// here do.
//
// # Record format
//
// Key: the stream id. Timestamp: the event's commit time (milliseconds).
// Value: a version byte (1), then uvarint position, uvarint seq, the 16-byte
// id, the commit time as 8 bytes of big-endian Unix nanoseconds, the type
// (uvarint length + bytes), the schema version (zig-zag varint), the tags
// (uvarint count, each length-prefixed), the metadata (uvarint count of
// length-prefixed key/value pairs), and the payload as the rest of the
// value, byte for byte. No headers.
//
// With PublisherConfig.Schemas the value is instead Avro in the schema
// registry's wire format — a zero byte, the schema id (4 bytes big-endian),
// the Avro binary encoding — of EventSchema, the record logbook.Event,
// registered under the subject "<topic>-value" (TopicNameStrategy), so
// that a stock consumer with a Confluent deserializer reads the topic. The
// readers here read both formats, told apart by the first byte.
//
// # Partitions
//
// Records are partitioned by Kafka's default key hash (murmur2, as the Java
// client does). Adding partitions to a topic in use moves streams to other
// partitions and breaks per-stream order for consumers reading across the
// change: create the topic with the partitions it will need.
//
// # Reaching the brokers
//
// Every client the package makes — publisher, replica, processor, topic
// readers — takes Config, whose Security says how to reach the brokers:
// TLS with a CA, a server name and an optional client certificate, and
// SASL (SCRAM-SHA-512, SCRAM-SHA-256, or PLAIN over TLS) with a password
// from a file or PasswordEnv, re-read at each authentication. ParseURL
// fills it from a bus URL's query (tls_ca=…&sasl=…), and refuses a
// password in the URL.
package kafkabus
