package mysqllock

import (
	"net/url"
	"testing"
)

// TestDSNInterpolatesByDefault: a URL's statements are one round trip
// each (interpolateParams) unless the URL says otherwise.
func TestDSNInterpolatesByDefault(t *testing.T) {
	for _, c := range []struct {
		query string
		want  bool
	}{{"", true}, {"interpolateParams=false", false}, {"interpolateParams=true", true}} {
		u, _ := url.Parse("mysql://app@db.internal/locks")
		q, _ := url.ParseQuery(c.query)
		mc, err := dsnConfig(u, q)
		if err != nil {
			t.Fatal(err)
		}
		if mc.InterpolateParams != c.want {
			t.Errorf("query %q: InterpolateParams = %v, want %v", c.query, mc.InterpolateParams, c.want)
		}
	}
}
