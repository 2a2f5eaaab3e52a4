package metrics_test

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// labels select one series: label name to value.
type labels map[string]string

// value reads the series name{want} from g: a counter's or gauge's value,
// a histogram's sample count. ok is false when there is no such series.
func value(t *testing.T, g prometheus.Gatherer, name string, want labels) (v float64, ok bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := labels{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if !maps.Equal(got, want) {
				continue
			}
			switch {
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// want fails unless name{l} has value v now.
func want(t *testing.T, g prometheus.Gatherer, name string, l labels, v float64) {
	t.Helper()
	if got, ok := value(t, g, name, l); !ok || got != v {
		t.Fatalf("%s%s = %v (present: %v), want %v; every series:\n%s", name, format(l), got, ok, v, dump(t, g))
	}
}

// eventually waits up to 5 s for name{l} to reach v: hooks that follow a
// lease's Done (Ended) run just after the channel closes.
func eventually(t *testing.T, g prometheus.Gatherer, name string, l labels, v float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, ok := value(t, g, name, l); ok && got == v {
			return
		}
		if time.Now().After(deadline) {
			want(t, g, name, l, v)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sum adds the values (histograms: sample counts) of every series of name.
func sum(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	total := 0.0
	for _, s := range allSeries(t, g) {
		if s.name == name {
			total += s.value
		}
	}
	return total
}

type series struct {
	name   string
	labels labels
	value  float64
}

func allSeries(t *testing.T, g prometheus.Gatherer) []series {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []series
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := labels{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			v, _ := value(t, g, mf.GetName(), l)
			out = append(out, series{mf.GetName(), l, v})
		}
	}
	return out
}

// dump lists every series, for failure messages.
func dump(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	var b strings.Builder
	for _, x := range allSeries(t, g) {
		fmt.Fprintf(&b, "%s%s %v\n", x.name, format(x.labels), x.value)
	}
	return b.String()
}

// format writes l as Prometheus does: {a="1",b="2"}.
func format(l labels) string {
	var ls []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		ls = append(ls, fmt.Sprintf("%s=%q", k, l[k]))
	}
	return "{" + strings.Join(ls, ",") + "}"
}

func strconvFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// count is the number of series of the named metrics (all: none named),
// as prometheus/testutil.GatherAndCount counts them. (testutil itself
// needs a module go.mod does not list: github.com/kylelemons/godebug.)
func count(t *testing.T, g prometheus.Gatherer, names ...string) int {
	t.Helper()
	n := 0
	for _, s := range allSeries(t, g) {
		if len(names) == 0 || slices.Contains(names, s.name) {
			n++
		}
	}
	return n
}
