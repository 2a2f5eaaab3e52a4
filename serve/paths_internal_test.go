package serve

import "testing"

// pathSeeds are paths, clean and not, for FuzzCleanPath.
var pathSeeds = []string{
	"/", "", "/v1/locks/a/acquire", "/v1/locks//acquire", "/v1/locks/", "/v1/locks", "/v1/leases/",
	"/v1/leases/x", "/v1/locks/./acquire", "/v1/locks/../x", "/v1/locks/%2E/acquire", "/a//b", "/a/b/",
	"/a/./b", "/..", "v1/locks/", "v1/locks//x", "/v1/other//x", "/v1//locks", "//", "/v1/semaphores/s/acquire/",
	"/static/", "/v1/dashboard/stream", "*",
}

// FuzzCleanPath: the allocation-free check of a path agrees with the
// description of its faults: clean exactly when there is none.
func FuzzCleanPath(f *testing.F) {
	for _, p := range pathSeeds {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if fault := describeFault(p); cleanPath(p) != (fault == "") {
			t.Errorf("path %q: clean %v, fault %q", p, cleanPath(p), fault)
		}
	})
}

// TestCleanPathAllocatesNothing: the check every request's path goes
// through allocates nothing when the path is clean.
func TestCleanPathAllocatesNothing(t *testing.T) {
	if got := testing.AllocsPerRun(100, func() { _ = pathFault("/v1/locks/some-name/acquire") }); got != 0 {
		t.Errorf("pathFault of a clean path: %.0f allocations, want 0", got)
	}
}
