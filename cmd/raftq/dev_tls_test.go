package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDevBanner_TLS(t *testing.T) {
	b := devBanner{kafka: []string{"127.0.0.1:9092"}, admin: []string{"127.0.0.1:9644"}, dir: "/tmp/d", self: "raftq"}
	if strings.Contains(b.String(), "security.protocol") {
		t.Errorf("a banner without --tls speaks of TLS:\n%s", b.String())
	}
	d, err := newDevTLS(t.TempDir(), 9092, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.base != 9292 {
		t.Errorf("SSL base port %d, want --base-port + 200", d.base)
	}
	b.tls, b.tlsKafka, b.saslSSLKafka = d, []string{"127.0.0.1:9292"}, []string{"127.0.0.1:9342"}
	got := b.String()
	for _, want := range []string{
		"ssl bootstrap       127.0.0.1:9292\n",
		"kcat -b 127.0.0.1:9292 -X security.protocol=ssl -X ssl.ca.location=" + d.node.CA + " -t demo -C -e\n",
		"raftq topic list --brokers 127.0.0.1:9292 --tls-ca-file " + d.node.CA + "\n",
		"--tls-cert-file " + d.client.Cert + " --tls-key-file " + d.client.Key,
		"sasl_ssl bootstrap  127.0.0.1:9342\n",
		"kcat -b 127.0.0.1:9342 -X security.protocol=SASL_SSL -X ssl.ca.location=" + d.node.CA + " -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=dev -X sasl.password=dev-secret -L\n",
		"Ctrl-C stops the cluster.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
	}
}

// raftq dev --tls serves SSL and SASL_SSL beside plaintext: the printed
// raftq commands produce and consume over TLS (with and without the
// client certificate) and list topics over SASL_SSL as the dev user;
// kcat lists metadata over both with the printed settings; a client not
// trusting the dev CA is refused; and a second run on the same data dir
// reuses the certificates and the user. The peer port serves mutual
// TLS from the same CA.
func TestDev_TLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev node; skipped with -short")
	}
	dir := filepath.Join(t.TempDir(), "dev")
	base, admin := freePortRuns(t)
	tlsPort := freePort(t)
	for !portFree(tlsPort + devSASLSSLOffset) {
		tlsPort = freePort(t)
	}
	args := []string{"dev", "--tls", "--nodes", "1", "--data-dir", dir, "--base-port", fmt.Sprint(base), "--admin-port", fmt.Sprint(admin), "--tls-port", fmt.Sprint(tlsPort)}
	dev := startCLI(t, args...)
	waitFor(t, 90*time.Second, "the dev banner", func(context.Context) bool { return strings.Contains(dev.stdout.String(), "Ctrl-C stops the cluster") })
	banner := dev.stdout.String()
	ssl := bannerField(t, banner, `ssl bootstrap +(\S+)`)
	if ssl != fmt.Sprintf("127.0.0.1:%d", tlsPort) {
		t.Fatalf("ssl bootstrap %s, want port %d", ssl, tlsPort)
	}
	tlsDir := filepath.Join(dir, "tls")
	ca := filepath.Join(tlsDir, "ca.crt")
	cli(t, 0, "one\ntwo\n", "produce", "demo", "--brokers", ssl, "--tls-ca-file", ca)
	out := cli(t, 0, "", "consume", "demo", "--brokers", ssl, "--tls-ca-file", ca,
		"--tls-cert-file", filepath.Join(tlsDir, "client.crt"), "--tls-key-file", filepath.Join(tlsDir, "client.key"))
	if got := lines(out.stdout); len(got) != 2 || got[0] != "one" || got[1] != "two" {
		t.Errorf("consumed %q over TLS", got)
	}
	sasl := bannerField(t, banner, `sasl_ssl bootstrap +(\S+)`)
	saslFlags := []string{"--tls-ca-file", ca, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", devSASLUser, "--sasl-password", devSASLPassword}
	if out := cli(t, 0, "", append([]string{"topic", "list", "--brokers", sasl}, saslFlags...)...); !strings.Contains(out.stdout, "demo") {
		t.Errorf("topic list over SASL_SSL:\n%s", out.stdout)
	}
	checkPeerTLS(t, fmt.Sprintf("127.0.0.1:%d", base+100), ca)
	if refused := cliPromptly(t, 1, "", "topic", "list", "--brokers", ssl, "--tls"); !strings.Contains(refused.stderr, "certificate") {
		t.Errorf("a client not trusting the dev CA: stderr %q, want a certificate error", refused.stderr)
	}
	if kcat, err := exec.LookPath("kcat"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		meta, err := exec.CommandContext(ctx, kcat, "-b", ssl, "-X", "security.protocol=ssl", "-X", "ssl.ca.location="+ca, "-L").CombinedOutput()
		if err != nil || !strings.Contains(string(meta), "demo") {
			t.Errorf("kcat -L over SSL: %v\n%s", err, meta)
		}
		meta, err = exec.CommandContext(ctx, kcat, "-b", sasl, "-X", "security.protocol=SASL_SSL", "-X", "ssl.ca.location="+ca,
			"-X", "sasl.mechanisms=SCRAM-SHA-512", "-X", "sasl.username="+devSASLUser, "-X", "sasl.password="+devSASLPassword, "-L").CombinedOutput()
		if err != nil || !strings.Contains(string(meta), "demo") {
			t.Errorf("kcat -L over SASL_SSL: %v\n%s", err, meta)
		}
	}
	before, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	dev.stop(t)
	runDevUntilBanner(t, args)
	after, err := os.ReadFile(ca)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the second run did not reuse the dev CA (%v)", err)
	}
}

// freePort is a loopback port free now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// checkPeerTLS: the node's peer port at addr serves TLS with the dev
// CA's node certificate.
func checkPeerTLS(t *testing.T, addr, caFile string) {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS to the peer port %s: %v", addr, err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; got != "raftq-dev-node" {
		t.Errorf("the peer port presents %q, want the dev node certificate", got)
	}
}
