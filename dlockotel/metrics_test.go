package dlockotel

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestMetrics: a grant, a refused try, a refresh, a release and a loss
// are counted under the right attributes, and no lock name is one.
func TestMetrics(t *testing.T) {
	ctx := t.Context()
	l, err := dlock.Open(ctx, "mem://otel-metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	if err := InstrumentMetrics(l, WithMeterProvider(mp), WithAttributes(attribute.String("service.role", "test"))); err != nil {
		t.Fatal(err)
	}
	a, err := l.Acquire(ctx, "m/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(ctx, "m/a"); err == nil {
		t.Fatal("TryAcquire of a held lock succeeded")
	}
	if err := a.Refresh(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	b, err := l.Acquire(ctx, "m/b", dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, reader)["dlock.leases.held{backend=mem,kind=mutex,role=test}"]; got != 2 {
		t.Errorf("leases held with two granted: %v, want 2", got)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := l.ForceRelease(ctx, "m/b"); err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	var got map[string]float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got = collect(t, reader); got["dlock.leases.held{backend=mem,kind=mutex,role=test}"] == 0 {
			break
		}
	}
	reason := b.Err().(*dlock.LostError).Reason
	want := map[string]float64{
		"dlock.acquire.duration{backend=mem,kind=mutex,outcome=acquired,role=test}":    2,
		"dlock.acquire.duration{backend=mem,kind=mutex,outcome=held,role=test}":        1,
		"dlock.leases.held{backend=mem,kind=mutex,role=test}":                          0,
		"dlock.lease.duration{backend=mem,kind=mutex,reason=released,role=test}":       1,
		"dlock.lease.duration{backend=mem,kind=mutex,reason=" + reason + ",role=test}": 1,
		"dlock.lease.refreshes{backend=mem,kind=mutex,result=ok,role=test}":            1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "m/a") || strings.Contains(k, "m/b") {
			t.Errorf("a lock name is an attribute: %s", k)
		}
	}
}

// collect reads every data point as "name{k=v,...}" → value: the sum of
// a counter, the count of a histogram. Attribute keys lose their prefix
// (dlock.backend → backend) to keep the table short.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name+series(p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name+series(p.Attributes)] = float64(p.Count)
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func series(set attribute.Set) string {
	var kv []string
	for _, a := range set.ToSlice() {
		k := string(a.Key)
		k = k[strings.LastIndex(k, ".")+1:]
		kv = append(kv, fmt.Sprintf("%s=%s", k, a.Value.String()))
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}
