package sdk

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/retryhttp/retryhttp"
)

// fakeS3 answers PUT /bucket/key: a 503 SlowDown first, then 200. It counts
// the attempts and the bytes of the last one.
func fakeS3(tls bool) (*httptest.Server, *atomic.Int32, *atomic.Int64) {
	var n atomic.Int32
	var got atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.Copy(io.Discard, r.Body)
		got.Store(b)
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		}
		w.Header().Set("ETag", `"abc"`)
	})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	return srv, &n, &got
}

// awsTransport is the transport of the client LoadDefaultConfig built:
// with AWS_CA_BUNDLE set, it trusts the bundle.
func awsTransport(cfg aws.Config) http.RoundTripper {
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		return bc.GetTransport()
	}
	return http.DefaultTransport
}

func s3Client(cfg aws.Config, url string) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(url)
		o.UsePathStyle = true
	})
}

func staticConfig(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	return config.LoadDefaultConfig(ctx, append([]func(*config.LoadOptions) error{
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")),
		config.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }), // one retry layer: the Transport's
	}, opts...)...)
}

// aws-sdk-go-v2: its retryer off (aws.NopRetryer), the Transport retries,
// over the transport the SDK builds (see awsTransport: config.WithHTTPClient
// with a client of your own fails when AWS_CA_BUNDLE is set). An upload's
// body reaches the Transport without GetBody and cannot be
// rewound (the SDK wraps its seekable stream in a plain ReadCloser), so the
// Transport can retry it only by copying it into memory, which it does up
// to Policy.MaxBufferedBody (1 MiB): a 5 MiB PutObject is sent once and
// its 503 comes back. Raise MaxBufferedBody for the calls that upload (one
// copy per upload in flight), here for one call with WithPolicy.
func Example_aws() {
	srv, attempts, got := fakeS3(false)
	defer srv.Close()
	ctx := context.Background()
	cfg, err := staticConfig(ctx)
	if err != nil {
		panic(err)
	}
	cfg.HTTPClient = &http.Client{Transport: &retryhttp.Transport{Base: awsTransport(cfg)}}
	client := s3Client(cfg, srv.URL)
	body := bytes.Repeat([]byte("x"), 5<<20)
	put := func(ctx context.Context) error {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"), Body: bytes.NewReader(body)})
		return err
	}

	err = put(ctx)
	fmt.Println("default policy:", attempts.Load(), "attempt, error:", err != nil)

	attempts.Store(0)
	err = put(retryhttp.WithPolicy(ctx, retryhttp.Policy{MaxBufferedBody: 8 << 20}))
	fmt.Println("MaxBufferedBody 8 MiB:", attempts.Load(), "attempts, error:", err, "bytes:", got.Load())
	// Output:
	// default policy: 1 attempt, error: true
	// MaxBufferedBody 8 MiB: 2 attempts, error: <nil> bytes: 5242880
}

// With AWS_CA_BUNDLE set, LoadDefaultConfig refuses an http.Client it did
// not build ("unable to add custom RootCAs HTTPClient"). The working setup
// lets it build its client, with the bundle, and puts the Transport over
// that client's transport.
func TestAWSCABundle(t *testing.T) {
	srv, attempts, _ := fakeS3(true)
	defer srv.Close()
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	ctx := context.Background()

	_, err := staticConfig(ctx, config.WithHTTPClient(&http.Client{Transport: &retryhttp.Transport{}}))
	if err == nil || !strings.Contains(err.Error(), "RootCAs") {
		t.Fatalf("a custom client with AWS_CA_BUNDLE: %v; the SDK was expected to refuse it", err)
	}

	cfg, err := staticConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTPClient = &http.Client{Transport: &retryhttp.Transport{Base: awsTransport(cfg)}}
	_, err = s3Client(cfg, srv.URL).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("b"), Key: aws.String("k"),
		Body: strings.NewReader("small")})
	if err != nil {
		t.Fatal(err)
	}
	if attempts.Load() != 2 {
		t.Fatalf("%d attempts, want 2: the Transport retried the 503 over the bundle's TLS", attempts.Load())
	}
}
