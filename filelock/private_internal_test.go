package filelock

import "context"

// privateDriver opens path on a store of its own, shared with no other
// Locker: a second process in miniature, for tests and benchmarks.
func privateDriver(path, sync string) (*fileDriver, error) {
	s, err := openStore(context.Background(), path, Config{Sync: sync, Retention: DefaultRetention})
	if err != nil {
		return nil, err
	}
	return &fileDriver{store: s, release: s.close}, nil
}
