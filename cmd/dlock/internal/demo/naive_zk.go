package demo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// naiveZK is a plain persistent znode per key: create if absent, delete
// whoever created it. ZooKeeper has no key expiry (TTL nodes are off by
// default), so a TTL is emulated the naive way: the expiry is written in
// the node's data and an expired node counts as absent.
type naiveZK struct {
	c    *zk.Conn
	root string
}

func openNaiveZK(u *url.URL) (naiveStore, error) {
	c, _, err := zk.Connect(strings.Split(u.Host, ","), 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(discardZKLogger{}))
	if err != nil {
		return nil, fmt.Errorf("demo: zookeeper: %w", err)
	}
	if u.User != nil {
		if err := c.AddAuth("digest", []byte(u.User.String())); err != nil {
			c.Close()
			return nil, fmt.Errorf("demo: zookeeper auth: %w", err)
		}
	}
	s := &naiveZK{c: c, root: strings.TrimSuffix(u.Path, "/") + "/dlock-naive"}
	if err := s.ensureRoot(); err != nil {
		c.Close()
		return nil, err
	}
	return s, nil
}

type discardZKLogger struct{}

func (discardZKLogger) Printf(string, ...any) {}

func (s *naiveZK) ensureRoot() error {
	path := ""
	for _, part := range strings.Split(strings.TrimPrefix(s.root, "/"), "/") {
		path += "/" + part
		if _, err := s.c.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("demo: zookeeper: create %s: %w", path, err)
		}
	}
	return nil
}

func (s *naiveZK) What() string { return "a plain ZooKeeper znode" }
func (s *naiveZK) Close() error { s.c.Close(); return nil }

func (s *naiveZK) path(key string) string { return s.root + "/" + url.PathEscape(key) }

func (s *naiveZK) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	expires := int64(0)
	if ttl > 0 {
		expires = time.Now().Add(ttl).UnixMilli()
	}
	data := []byte(strconv.FormatInt(expires, 10) + " " + value)
	if _, ok, err := s.Get(ctx, key); err != nil || ok {
		return false, err
	}
	// Expired or absent: the naive way, delete then create (not atomic).
	if err := s.c.Delete(s.path(key), -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return false, err
	}
	_, err := s.c.Create(s.path(key), data, 0, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNodeExists) {
		return false, nil
	}
	return err == nil, err
}

func (s *naiveZK) Del(ctx context.Context, key string) error {
	err := s.c.Delete(s.path(key), -1)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

func (s *naiveZK) Get(ctx context.Context, key string) (string, bool, error) {
	data, _, err := s.c.Get(s.path(key))
	if errors.Is(err, zk.ErrNoNode) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	exp, value, _ := strings.Cut(string(data), " ")
	ms, _ := strconv.ParseInt(exp, 10, 64)
	if ms != 0 && time.Now().UnixMilli() >= ms {
		return "", false, nil
	}
	return value, true, nil
}
