package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/logbook/logbook/engine/kafkabus"
	"github.com/logbook/logbook/engine/registry"
	"github.com/logbook/logbook/internal/cliutil"
	"github.com/logbook/logbook/services/notify"
	"github.com/logbook/logbook/services/notify/deliver"
	"github.com/logbook/logbook/services/notify/pipeline"
	"github.com/logbook/logbook/services/notify/stages"
	"github.com/logbook/logbook/services/notify/userscdc"
)

// notifyStageFlags are `logbook notify stage`'s flags.
type notifyStageFlags struct {
	bus, registryURL, registryToken string
	usersDB, usersSchema            string
	pushURL, emailURL               string
	instance                        string
	partitions, maxBatch, senders   int
	attempts                        int
	txnTimeout, sessionTimeout      time.Duration
	atLeastOnce                     bool
	// registryTLS verifies an https:// --registry (and presents a client
	// certificate to a write node that asks for one); deliverTLS the
	// https:// --push-url and --email-url.
	registryTLS, deliverTLS cliutil.ClientTLSFlags
}

func newNotifyStageCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stage preference|build|deliver --bus kafka://…/PREFIX --registry URL",
		Short: "Run one process of one notify pipeline stage, connected to the others by Kafka",
		Long: `Runs one process of the notify pipeline's stage deployment: the preference
check, the build and the delivery as separate processes connected by the
Kafka topics PREFIX.requests → PREFIX.checked → PREFIX.built → PREFIX.outcomes
(PREFIX is the bus URL's topic). The processes of a stage form the consumer
group PREFIX.STAGE and share its input's partitions: start several to scale
a stage on its own. Each poll's output and the input's offsets are
committed in one Kafka transaction, so each stage's output holds every
input's result once, across crashes. The stage events are Avro records in
the schema registry's wire format, their schemas registered under
TOPIC-value in the registry at --registry (logbook's own, served by a write
node at /registry; its token from LOGBOOK_REGISTRY_TOKEN or
--registry-token-file). An https:// registry is verified against
--registry-ca, and --registry-cert/--registry-key answer a write node that
demands client certificates; --deliver-ca (and --deliver-cert/--deliver-key)
do the same for https:// delivery endpoints. The bus URL carries Kafka's
TLS and SASL (tls_ca=, sasl=SCRAM-SHA-512, sasl_user=, the password in
LOGBOOK_BUS_PASSWORD or sasl_password_file=). Give each process of a stage its own --instance,
and the same one when it is restarted: the restart then aborts at once the
transaction the old process left open. Delivery posts outside any
transaction: a batch posted by a process killed before its commit is
posted again, with the same idempotency keys, which the endpoint takes
once.`,
		Example: `  export LOGBOOK_USERS_DB=postgres://localhost/users LOGBOOK_REGISTRY_TOKEN=…
  logbook notify stage preference --bus kafka://127.0.0.1:9092/notify --registry http://127.0.0.1:8080/registry --instance p1 &
  logbook notify stage build --bus kafka://127.0.0.1:9092/notify --registry http://127.0.0.1:8080/registry --instance b1 &
  logbook notify stage deliver --bus kafka://127.0.0.1:9092/notify --registry http://127.0.0.1:8080/registry --instance d1 \
      --push-url http://127.0.0.1:8084/deliver --email-url http://127.0.0.1:8084/deliver`,
		ValidArgs: stages.Names,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("name one stage: preference, build or deliver (got %d arguments)", len(args))
			}
			return nil
		},
	}
	fs := cmd.Flags()
	var f notifyStageFlags
	fs.StringVar(&f.bus, "bus", "", "kafka://host:port/PREFIX[?tls_ca=…&sasl=…]: the brokers, and the prefix of the stage topics (required)")
	secretFlag(fs, "bus")
	fs.StringVar(&f.registryURL, "registry", "", "URL of the schema registry's REST API, e.g. a logbook write node's http://HOST:PORT/registry (required)")
	fromEnv(fs, "registry")
	fs.StringVar(&f.registryToken, "registry-token", "", "bearer token for the registry, of role schema-admin (registering the stage schemas writes)")
	secretFlag(fs, "registry-token")
	f.registryTLS.Register(fs, "registry", "the https:// --registry")
	fs.StringVar(&f.usersDB, "users-db", "", "postgres://… URL of the users' database (or a replica), read by preference and build")
	secretFlag(fs, "users-db")
	fs.StringVar(&f.usersSchema, "users-schema", "public", "schema of the users' tables")
	fs.StringVar(&f.pushURL, "push-url", "", "deliver: URL push batches are posted to")
	fs.StringVar(&f.emailURL, "email-url", "", "deliver: URL e-mail batches are posted to")
	f.deliverTLS.Register(fs, "deliver", "the https:// --push-url and --email-url")
	fs.IntVar(&f.attempts, "attempts", 6, "deliver: calls per batch before it fails for good")
	fs.IntVar(&f.senders, "senders", 8, "deliver: calls in flight at once")
	host, _ := os.Hostname()
	fs.StringVar(&f.instance, "instance", host+"-"+strconv.Itoa(os.Getpid()), "this process's name among its stage's: its transactional ID is PREFIX.STAGE.INSTANCE; reuse it on restart")
	fs.IntVar(&f.partitions, "partitions", 12, "partitions of the stage topics, if this process creates them: the most processes a stage can use")
	fs.IntVar(&f.maxBatch, "max-batch", 100, "input records per poll, one transaction each")
	fs.DurationVar(&f.txnTimeout, "txn-timeout", 10*time.Second, "Kafka aborts a transaction left open this long (by a process that died)")
	fs.DurationVar(&f.sessionTimeout, "session-timeout", 10*time.Second, "a process silent this long leaves its stage's group, and its partitions go to the others")
	fs.BoolVar(&f.atLeastOnce, "unsafe-at-least-once", false, "no transactions: commit the input offsets after the output, outside a transaction (a crash in between writes output twice); to measure the transactions' cost only")
	_ = fs.MarkHidden("unsafe-at-least-once")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		stage := args[0]
		switch {
		case stage != stages.Preference && stage != stages.Build && stage != stages.Deliver:
			return usagef("stage %q: want preference, build or deliver", stage)
		case f.bus == "":
			return usageError{Msg: "--bus kafka://host:port/PREFIX is required"}
		case f.registryURL == "":
			return usageError{Msg: "--registry URL is required: where the stage events' schemas are registered"}
		case stage != stages.Deliver && (f.usersDB == "" || !isPostgresURL(f.usersDB)):
			return usagef("--users-db postgres://… is required by the %s stage", stage)
		case stage == stages.Deliver && (f.pushURL == "" || f.emailURL == ""):
			return usageError{Msg: "--push-url and --email-url are required by the deliver stage"}
		case f.instance == "":
			return usageError{Msg: "--instance must not be empty"}
		case f.partitions < 1 || f.maxBatch < 1 || f.senders < 1 || f.attempts < 1 || f.txnTimeout <= 0 || f.sessionTimeout <= 0:
			return usageError{Msg: "--partitions, --max-batch, --senders, --attempts, --txn-timeout and --session-timeout must be positive"}
		}
		bcfg, prefix, err := kafkabus.ParseURL(f.bus)
		if err != nil {
			return usagef("--bus %v", err)
		}
		if f.registryTLS.Set() && !strings.HasPrefix(f.registryURL, "https://") {
			return usageError{Msg: "--registry-ca, --registry-cert and --registry-key are for an https:// --registry"}
		}
		if f.deliverTLS.Set() && stage != stages.Deliver {
			return usagef("--deliver-ca, --deliver-cert and --deliver-key are for the deliver stage, not %s", stage)
		}
		registryTLS, err := f.registryTLS.Config()
		if err != nil {
			return err
		}
		deliverTLS, err := f.deliverTLS.Config()
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		schemas, err := registry.NewClientTLS(f.registryURL, f.registryToken, registryTLS)
		if err != nil {
			return usagef("--registry: %v", err)
		}
		cfg := stages.Config{Bus: bcfg, Topics: stages.TopicsOf(prefix), Schemas: schemas, Instance: f.instance,
			Policy: pipeline.DefaultPolicy, Templates: pipeline.DefaultTemplates,
			Senders: f.senders, MaxBatch: f.maxBatch, TxnTimeout: f.txnTimeout, SessionTimeout: f.sessionTimeout, AtLeastOnce: f.atLeastOnce}
		if stage == stages.Deliver {
			for name, u := range map[string]string{"--push-url": f.pushURL, "--email-url": f.emailURL} {
				if err := deliver.CheckURL(u); err != nil {
					return usagef("%s: %v", name, err)
				}
			}
			cfg.Deliverer, err = deliver.New(deliver.Config{
				Endpoints: map[notify.Channel]string{notify.Push: f.pushURL, notify.Email: f.emailURL},
				Attempts:  f.attempts,
				Client:    &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * f.senders, IdleConnTimeout: time.Minute, TLSClientConfig: deliverTLS}},
			})
			if err != nil {
				return usageError{Msg: err.Error()}
			}
		} else {
			src, err := userscdc.OpenSource(ctx, f.usersDB, f.usersSchema)
			if err != nil {
				return fmt.Errorf("users' database: %w", err)
			}
			defer src.Close()
			cfg.Users = userscdc.LookupUsers{Source: src}
		}
		if err := stages.EnsureTopics(ctx, bcfg, cfg.Topics, int32(f.partitions)); err != nil {
			return err
		}
		e.log.Info("notify stage running", "stage", stage, "group", cfg.Topics.Group(stage), "instance", f.instance, "at_least_once", f.atLeastOnce)
		return stages.Run(ctx, stage, cfg)
	}
	return cmd
}
