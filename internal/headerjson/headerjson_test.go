package headerjson

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

func TestAppendAndParse(t *testing.T) {
	for _, h := range []http.Header{
		nil,
		{},
		{"Content-Type": {"application/json"}},
		{"Vary": {"Accept", "Origin"}, "Location": {"/charges/1"}, "X-Empty": {}, "X-Nil": nil},
		{"X-Html": {"<a href=\"x\">&</a>"}, "X-Utf8": {"café"}, "X-Ctl": {"a\nb\tc\x01"}},
		{"X-Bad-Utf8": {"\xff\xfe"}, "X-Sep": {"\u2028"}},
	} {
		got, err := Append(nil, h)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(h)
		if !bytes.Equal(got, want) {
			t.Errorf("Append(%q) = %s, encoding/json writes %s", h, got, want)
		}
		back, err := Parse(got)
		if err != nil {
			t.Fatal(err)
		}
		var wantBack http.Header
		json.Unmarshal(want, &wantBack)
		if !reflect.DeepEqual(back, wantBack) {
			t.Errorf("Parse(%s) = %q, encoding/json reads %q", got, back, wantBack)
		}
	}
}

// PostgreSQL's jsonb prints with spaces; duplicate keys, nulls and
// trailing data follow encoding/json.
func TestParseAsEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"Content-Type": ["application/json"], "Vary": ["a", "b"]}`,
		` null `, `{}`, `{"A":null}`, `{"A":[]}`, `{"A":["1"],"A":["2"]}`,
		`{"A":["\u0041"]}`, `{"A":["x"]} x`, `{"A":"x"}`, `{"A":[1]}`, `[]`, `{`, `{"A":["x",]}`, ``,
	} {
		got, err := Parse([]byte(in))
		var want http.Header
		wantErr := json.Unmarshal([]byte(in), &want)
		if (err != nil) != (wantErr != nil) || err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %q, %v; encoding/json: %q, %v", in, got, err, want, wantErr)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"A":["b"]}`, `null`, `{"A": ["b", "c"], "D": null}`, `{"A":["\n"]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Parse(in)
		var want http.Header
		wantErr := json.Unmarshal(in, &want)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Parse(%q): error %v, encoding/json: %v", in, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Parse(%q) = %q, encoding/json reads %q", in, got, want)
		}
	})
}

func FuzzAppend(f *testing.F) {
	f.Add("Content-Type", "application/json", "x")
	f.Add("A<", "b&", "\xff")
	f.Fuzz(func(t *testing.T, k, v1, v2 string) {
		h := http.Header{k: {v1, v2}, "Z": {v2}}
		got, err := Append(nil, h)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(h)
		if !bytes.Equal(got, want) {
			t.Fatalf("Append(%q) = %s, encoding/json writes %s", h, got, want)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	in := []byte(`{"Content-Type": ["application/json"], "Location": ["/v1/charges/ch_1"]}`)
	b.Run("headerjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Parse(in)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var h http.Header
			json.Unmarshal(in, &h)
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	h := http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/charges/ch_1"}}
	buf := make([]byte, 0, 256)
	b.Run("headerjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = Append(buf[:0], h)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(h)
		}
	})
}
