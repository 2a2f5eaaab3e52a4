package dlockotel

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/filelock"
	_ "github.com/dlockdev/dlock/memlock"
	_ "github.com/dlockdev/dlock/redislock"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// backends runs fn once per backend: the in-memory one, the embedded
// SQLite file, and a real redis-server.
func backends(t *testing.T, fn func(t *testing.T, url string)) {
	t.Run("mem", func(t *testing.T) {
		fn(t, fmt.Sprintf("mem://otel-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano()))
	})
	t.Run("file", func(t *testing.T) { fn(t, "file://"+filepath.Join(t.TempDir(), "dlock.db")) })
	t.Run("redis", func(t *testing.T) { fn(t, redisURL(t)) })
}

// traced is an instrumented Locker and what its spans went to.
type traced struct {
	l   *dlock.Locker
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
	tr  *tracing
}

// newTraced opens url and instruments it. At cleanup it closes the Locker,
// then fails the test if a span was left open or a lease left in a map.
func newTraced(t *testing.T, url string) *traced {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	l, err := dlock.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := instrument(l, []Option{WithTracerProvider(tp), WithAttributes(attribute.String("service.role", "test"))})
	if err != nil {
		t.Fatal(err)
	}
	x := &traced{l: l, rec: rec, tp: tp, tr: tr}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		x.noneOpen(t)
		x.mapsEmpty(t)
	})
	return x
}

// caller starts the span an application would have open around the call.
func (x *traced) caller(ctx context.Context) (context.Context, trace.Span) {
	return x.tp.Tracer("app").Start(ctx, "caller")
}

// lockSpans waits until n lock spans have ended and returns them.
func (x *traced) lockSpans(t *testing.T, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var got []sdktrace.ReadOnlySpan
		for _, s := range x.rec.Ended() {
			if strings.HasPrefix(s.Name(), "dlock.lock ") {
				got = append(got, s)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("%d lock spans ended, want %d: %v", len(got), n, names(got))
			}
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noneOpen fails the test if a started span has not ended (after a grace
// period: a lost lease's span ends just after its Done closes).
func (x *traced) noneOpen(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(x.rec.Started()) != len(x.rec.Ended()) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	started, ended := x.rec.Started(), x.rec.Ended()
	if len(started) != len(ended) {
		var open []string
		for _, s := range started {
			if s.EndTime().IsZero() {
				open = append(open, s.Name())
			}
		}
		t.Errorf("%d spans started, %d ended; open: %v", len(started), len(ended), open)
	}
}

// mapsEmpty fails the test if a lease is still in the span maps.
func (x *traced) mapsEmpty(t *testing.T) {
	t.Helper()
	for _, m := range []struct {
		name string
		n    int
	}{{"tracing.spans", count(&x.tr.spans)}, {"leaseSpans", count(&leaseSpans)}} {
		if m.n != 0 {
			t.Errorf("%s holds %d leases after they ended", m.name, m.n)
		}
	}
}

// count is the number of entries in m.
func count(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

// attrs flattens a span's attributes into a map of their values as text.
func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// eventNames lists a span's events.
func eventNames(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

// wantAttrs fails the test unless got holds every key of want with its
// value.
func wantAttrs(t *testing.T, what string, got []attribute.KeyValue, want map[string]string) {
	t.Helper()
	m := attrs(got)
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s: attribute %s = %q, want %q (all: %v)", what, k, m[k], v, m)
		}
	}
}

// noSecret fails the test if the lease's token or owner is in any
// attribute of the span or its events.
func noSecret(t *testing.T, s sdktrace.ReadOnlySpan, ls *dlock.Lease) {
	t.Helper()
	all := s.Attributes()
	for _, e := range s.Events() {
		all = append(all, e.Attributes...)
	}
	for _, kv := range all {
		v := kv.Value.String()
		if strings.Contains(v, ls.Token()) || (ls.Owner() != "" && strings.Contains(v, ls.Owner())) {
			t.Errorf("attribute %s = %q holds the lease's token or owner", kv.Key, v)
		}
	}
}
