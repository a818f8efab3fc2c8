package idempotency

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

var headerSamples = []string{
	`{"Content-Type":["application/json"]}`,
	`{"Content-Type": ["application/json"], "Location": ["/v1/charges/ch_1"], "Set-Cookie": ["a=1", "b=2"]}`,
	`{}`, ` { } `, `{"X-Empty":[]}`, `{"A":["1"],"A":["2"]}`, `null`, `{"A":null}`, `{"A":[null]}`,
	`{"A":["caf\u00e9"]}`, `{"A":["café"]}`, `{"A":["q\"uote"]}`, `{"A":["x"],}`, `{"A":["x"]`, `{"A":"x"}`,
	`{"A":[1]}`, `[]`, ``, `{"A":["x"]} x`, "{\"A\":[\"\x01\"]}", `{"A" : [ "x" , "y" ] }`,
}

// UnmarshalHeader reads what json.Unmarshal reads, the same way, or fails
// where it fails.
func FuzzUnmarshalHeader(f *testing.F) {
	for _, s := range headerSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := UnmarshalHeader(b)
		var want http.Header
		werr := json.Unmarshal(b, &want)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%q: error %v, encoding/json's %v", b, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v, encoding/json's %#v", b, got, want)
		}
	})
}

// The form MarshalHeader writes for ordinary headers is read without
// encoding/json, and a header round-trips.
func TestHeaderRoundTrip(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"a=1", "b=2"}, "X-Empty": {}}
	b, err := MarshalHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parseHeader(b); !ok {
		t.Fatalf("%s: left to encoding/json", b)
	}
	got, err := UnmarshalHeader(b)
	if err != nil || !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip: %#v, %v; want %#v", got, err, h)
	}
	odd := http.Header{"X-Name": {"café", "tab\there", `q"uote`}}
	if b, err = MarshalHeader(odd); err != nil {
		t.Fatal(err)
	}
	if got, err = UnmarshalHeader(b); err != nil || !reflect.DeepEqual(got, odd) {
		t.Fatalf("round trip of %s: %#v, %v", b, got, err)
	}
}

func BenchmarkUnmarshalHeader(b *testing.B) {
	in := []byte(headerSamples[1])
	b.Run("UnmarshalHeader", func(b *testing.B) {
		for b.Loop() {
			if _, err := UnmarshalHeader(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var h http.Header
			if err := json.Unmarshal(in, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}
