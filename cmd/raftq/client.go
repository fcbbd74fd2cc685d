package main

import (
	"strings"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clientFlags are the connection flags every client subcommand shares.
type clientFlags struct {
	brokers string
}

func bindClientFlags(fs *pflag.FlagSet) *clientFlags {
	c := &clientFlags{}
	fs.StringVarP(&c.brokers, "brokers", "b", "127.0.0.1:9092", "bootstrap brokers, comma separated")
	return c
}

func (c *clientFlags) seeds() []string {
	var out []string
	for _, s := range strings.Split(c.brokers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// client returns a kgo client for the brokers with extra options.
func (c *clientFlags) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...)}, opts...)...)
}

func (c *clientFlags) admin() (*kadm.Client, func(), error) {
	cl, err := c.client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}
