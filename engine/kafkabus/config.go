package kafkabus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

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
}

func (c Config) client(opts ...kgo.Opt) (*kgo.Client, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("kafkabus: no brokers configured")
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOptions...)
	all = append(all, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("kafkabus: new client: %w", err)
	}
	return cl, nil
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

// partitionCount returns how many partitions topic has.
func partitionCount(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
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

// ParseURL reads kafka://host:port[,host:port…]/topic, the form of
// logbook's --bus flag.
func ParseURL(s string) (Config, string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "kafka" || u.Host == "" {
		return Config{}, "", fmt.Errorf("%q: want kafka://host:port[,host:port…]/topic", s)
	}
	topic := strings.Trim(u.Path, "/")
	if topic == "" || strings.Contains(topic, "/") {
		return Config{}, "", fmt.Errorf("%q: name one topic after the brokers, kafka://host:port/topic", s)
	}
	return Config{Brokers: strings.Split(u.Host, ",")}, topic, nil
}
