// Command kfake runs franz-go's kfake, a Kafka broker in one process, for
// the tests of the Kafka modules: started by kafkatest.Start on a port
// and a data directory of the test's own, killed and restarted by pid.
//
//	kfake -port 40123 -data-dir /tmp/x -partitions 4 -topics orders,payments
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "the loopback port to listen on (0: any)")
	dataDir := flag.String("data-dir", "", "where the broker keeps its log and groups across restarts (empty: in memory)")
	partitions := flag.Int("partitions", 1, "partitions of a topic it creates")
	topics := flag.String("topics", "", "topics to create at the first start, comma-separated")
	flag.Parse()
	opts := []kfake.Opt{kfake.Ports(*port), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(*partitions)}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kfake:", err)
		os.Exit(1)
	}
	for _, addr := range c.ListenAddrs() {
		fmt.Println(addr)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	c.Close()
}
