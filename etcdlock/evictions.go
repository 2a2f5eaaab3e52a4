package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"

	"github.com/dlockdev/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// evictedDir is the directory, under the prefix, of the eviction records
// ForceRelease writes: PREFIX + "%evicted/" + escape(NAME), valued "FENCE
// NAME" (the evicted holder's fence). A lock name is path-escaped in its
// keys, so it never yields a bare "%": no lock's keys can be mistaken for a
// record, and List skips the records (their directory does not unescape).
const evictedDir = "%evicted/"

// evictionRecordSecs is the TTL, in seconds, of the etcd lease that an
// eviction record is attached to. The record exists only to make a watch
// event: watchers active at its put are told, and one that reconnects
// resumes from its last revision, so the record need not outlive the
// event. The lease removes it afterwards.
const evictionRecordSecs = 10

// evictionBuffer is how many evictions wait for the portable layer before
// the watch stops reading (etcd's client buffers the rest).
const evictionBuffer = 64

// evictions is the key prefix of every eviction record.
func (k keyspace) evictions() string { return k.prefix + evictedDir }

// evictionKey is the key of name's eviction record.
func (k keyspace) evictionKey(name string) string { return k.evictions() + url.PathEscape(name) }

// evictionRecord is the value of an eviction record: "FENCE NAME".
func evictionRecord(name string, fence uint64) string {
	return driver.Eviction{Name: name, Fence: fence}.String()
}

// errWatchRefused is a watch that ended before etcd confirmed it.
var errWatchRefused = errors.New("etcd ended the eviction watch before confirming it")

// WatchEvictions implements driver.EvictionWatcher: it watches the puts of
// eviction records under the prefix (ForceRelease writes one in the
// transaction that deletes the holder's key), and returns once etcd has
// confirmed the watch. The channel closes when the watch ends (stop, or an
// error such as a compaction past a long disconnection); the holder then
// learns at its next refresh. stop cancels the watch and waits for the
// goroutine that decodes it.
func (d *etcdDriver) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	wch := d.cli.Watch(ctx, d.keys.evictions(), clientv3.WithPrefix(),
		clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
	first, ok := <-wch
	if !ok || first.Err() != nil || !first.Created {
		cancel()
		drainWatch(wch) // the client closes it once canceled
		err := first.Err()
		if err == nil {
			err = errWatchRefused
		}
		return nil, nil, fmt.Errorf("watch etcd evictions under %q: %w", d.keys.evictions(), err)
	}
	out := make(chan driver.Eviction, evictionBuffer)
	done := make(chan struct{})
	go decodeEvictions(ctx, wch, out, done)
	stop := sync.OnceFunc(func() {
		cancel()
		<-done
	})
	return out, stop, nil
}

// decodeEvictions turns the watch's record puts into evictions until the
// watch channel closes (ctx canceled, or the watch failed), then closes
// out and done.
func decodeEvictions(ctx context.Context, wch clientv3.WatchChan, out chan<- driver.Eviction, done chan<- struct{}) {
	defer close(done)
	defer close(out)
	defer drainWatch(wch)
	for resp := range wch {
		for _, ev := range resp.Events {
			e, ok := driver.ParseEviction(string(ev.Kv.Value))
			ok = ok && e.Name != ""
			if ev.Type != mvccpb.PUT || !ok {
				continue
			}
			select {
			case out <- e:
			case <-ctx.Done():
				return
			}
		}
	}
}

// drainWatch reads a canceled watch's channel until the client closes it.
func drainWatch(wch clientv3.WatchChan) {
	for range wch {
	}
}
