package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config says how to reach the Kafka cluster.
type Config struct {
	// Brokers are the seed brokers, host:port.
	Brokers []string
	// ClientOptions are added to every client this package makes: TLS,
	// SASL, a logger. Options that decide delivery (isolation level,
	// transactional ID, partitioner, consumer group, offsets) are set by
	// the package and must not be given here.
	ClientOptions []kgo.Opt
	// Security is how every client reaches the brokers: TLS, SASL. A bus
	// URL's parameters fill it in (ParseURL).
	Security Security
}

func (c Config) client(opts ...kgo.Opt) (*kgo.Client, error) {
	all, err := c.options(opts...)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("kafkabus: new client: %w", err)
	}
	return cl, nil
}

// options are a client's: the brokers, Security, ClientOptions, then opts.
func (c Config) options(opts ...kgo.Opt) ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("kafkabus: no brokers configured")
	}
	sec, err := c.Security.Options()
	if err != nil {
		return nil, err
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, sec...)
	all = append(all, c.ClientOptions...)
	return append(all, opts...), nil
}

// EnsureTopic creates topic with the given partitions if it does not exist
// (replication -1 takes the broker's default). An existing topic is left as
// it is, whatever its partition count.
func EnsureTopic(ctx context.Context, cfg Config, topic string, partitions int32, replication int16) error {
	cl, err := cfg.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	// CreateTime: the record timestamp is the event's commit time, which
	// is what ReplicaStore seeks by.
	ts := "CreateTime"
	_, err = kadm.NewClient(cl).CreateTopic(ctx, partitions, replication,
		map[string]*string{"message.timestamp.type": &ts}, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafkabus: create topic %s: %w", topic, err)
	}
	return nil
}

// topicWait bounds how long partitionCount waits for a topic the
// brokers do not know yet: one just created is known to the controller
// before every broker's metadata has it.
const topicWait = 10 * time.Second

// partitionCount returns how many partitions topic has, waiting up to
// topicWait while the brokers answer that they do not know it.
func partitionCount(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	deadline := time.Now().Add(topicWait)
	for {
		n, err := partitionCountOnce(ctx, adm, topic)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func partitionCountOnce(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafkabus: metadata of %s: %w", topic, err)
	}
	td, ok := tds[topic]
	if !ok {
		return 0, fmt.Errorf("kafkabus: topic %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if td.Err != nil {
		return 0, fmt.Errorf("kafkabus: topic %s: %w", topic, td.Err)
	}
	return len(td.Partitions), nil
}

// partitioner is the one every publisher uses: Kafka's default key hash.
// Processors compute it too, to tell which stored events belong to a
// partition whose records were deleted.
func partitioner(topic string) kgo.TopicPartitioner {
	return kgo.StickyKeyPartitioner(nil).ForTopic(topic)
}

func partitionOf(tp kgo.TopicPartitioner, stream string, partitions int) int32 {
	return int32(tp.Partition(&kgo.Record{Key: []byte(stream)}, partitions))
}

// ParseURL reads kafka://[user@]host:port[,host:port…]/topic[?params],
// the form of logbook's --bus flag. The parameters say how to reach the
// brokers (Security):
//
//	tls=true                 dial over TLS, verifying the brokers' certificates
//	tls_ca=FILE              … against this PEM CA rather than the system's roots
//	tls_server_name=NAME     … for this name rather than the broker's host
//	tls_cert=FILE&tls_key=FILE   a client certificate (mutual TLS)
//	sasl=SCRAM-SHA-512       authenticate (also SCRAM-SHA-256; PLAIN only over TLS)
//	sasl_user=NAME           … as this user (or kafka://NAME@host…)
//	sasl_password_file=FILE  … with the password in this file (else $LOGBOOK_BUS_PASSWORD)
//
// A password in the URL itself is refused: URLs end up in argv and logs.
// Naming tls_ca, tls_cert or tls_server_name implies tls=true. The CA,
// the client certificate and the password are read once here, so that a
// missing file is an error at start.
func ParseURL(s string) (Config, string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "kafka" || u.Host == "" {
		return Config{}, "", fmt.Errorf("%q: want kafka://host:port[,host:port…]/topic", redact(s))
	}
	topic := strings.Trim(u.Path, "/")
	if topic == "" || strings.Contains(topic, "/") {
		return Config{}, "", fmt.Errorf("%q: name one topic after the brokers, kafka://host:port/topic", redact(s))
	}
	sec, err := parseSecurity(u)
	if err != nil {
		return Config{}, "", fmt.Errorf("%q: %w", redact(s), err)
	}
	if _, err := sec.Options(); err != nil {
		return Config{}, "", err
	}
	return Config{Brokers: strings.Split(u.Host, ","), Security: sec}, topic, nil
}

// redact returns a bus URL fit for an error message: without its query
// and without any password in its user part.
func redact(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	if at, scheme := strings.LastIndex(s, "@"), strings.Index(s, "://"); at >= 0 && scheme >= 0 && scheme < at {
		if c := strings.Index(s[scheme+3:at], ":"); c >= 0 {
			s = s[:scheme+3+c] + ":***" + s[at:]
		}
	}
	return s
}

// NewClient returns a franz-go client for cfg (its brokers, Security and
// ClientOptions) with opts: for what this package does not wrap, like a
// stage's producer of its first topic.
func NewClient(cfg Config, opts ...kgo.Opt) (*kgo.Client, error) { return cfg.client(opts...) }
