package server

import "github.com/logbook/logbook/engine/kafkabus"

// Bus is a Kafka topic a server publishes its log to, or follows it
// from: the value of a --bus flag, kafka://host:port[,host:port…]/topic.
type Bus struct {
	// Config reaches the brokers.
	Config kafkabus.Config
	// Topic is the log's topic.
	Topic string
	// Avro: the values are in the schema registry's wire format, their
	// schema registered under <Topic>-value, rather than logbook's own.
	Avro bool
}

// ParseBus reads kafka://host:port[,host:port…]/topic, with the TLS and
// SASL parameters kafkabus.ParseURL takes (tls_ca=…&sasl=…). An empty url
// is no bus: nil, and no error.
func ParseBus(url string) (*Bus, error) {
	if url == "" {
		return nil, nil
	}
	cfg, topic, err := kafkabus.ParseURL(url)
	if err != nil {
		return nil, err
	}
	return &Bus{Config: cfg, Topic: topic}, nil
}
